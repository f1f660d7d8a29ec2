"""Who started a run: a label on what it creates (`HOST:PID` of launcher), so that a later
launcher can tell what a killed one left behind (the containers of either container engine)."""

from __future__ import annotations

import os
import socket
from typing import Any

from launcher.runtime.engine import Leftover

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


def orphan_containers(found: list[dict[str, Any]], idle: tuple[str, ...]) -> list[Leftover]:
    """Of a container listing (docker's API or `podman ps --format json`), those labelled with
    an owner launcher that ran here and is gone; `idle`: the states of one never started."""
    out = []
    for c in found:
        labels, state = c.get("Labels") or {}, c.get("State", "?")
        if state == "removing" or not is_orphan(labels.get(OWNER_LABEL, "")):
            continue  # one the engine is removing is none
        name = (c.get("Names") or ["?"])[0].lstrip("/")
        out.append(Leftover("container", c["Id"][:12],
                            f"{name}, run {labels.get(RUN_LABEL, '?')}, {state}",
                            idle=state in idle))
    return out
