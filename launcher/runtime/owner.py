"""Who started a run: a label on what it creates (`HOST:PID` of launcher), so that a later
launcher can tell what a killed one left behind."""

from __future__ import annotations

import os
import socket

OWNER_LABEL = "launcher.owner"
RUN_LABEL = "launcher.run"


def owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def is_orphan(label: str) -> bool:
    """The owner ran on this host and its process is gone."""
    host, _, pid = label.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    return not os.path.exists(f"/proc/{pid}")
