"""A workload run as another user (setpriv) in tests that need one: what that user may reach
and run."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def reachable(path: Path) -> bool:
    """Whether any user may reach `path` (every folder above it searchable by others)."""
    real = Path(os.path.realpath(path))
    return all(p.stat().st_mode & 0o001 for p in real.parents)


def interpreter_for(uid: int) -> str:
    """An interpreter `uid` may run (the venv's may sit in root's home)."""
    if uid == 0 or reachable(Path(sys.executable)):
        return sys.executable
    return shutil.which("python3", path="/usr/bin:/bin") or sys.executable
