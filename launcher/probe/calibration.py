"""Thread peaks measured on this host by `launcher calibrate` (and inside an image by `launcher
build`), and the versions of the frameworks they were measured with.

Read from $LAUNCHER_CALIBRATION, else the user's cache ($XDG_CACHE_HOME/launcher/
calibration.json), else an image's /etc/launcher/calibration.json; under a fixture root, only
ROOT/etc/launcher/calibration.json.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

# How the peaks were measured; an entry of an older method is not used for the CPU side.
# 2: GPUs hidden as a run hides them (the vendors' visible-device variables alone; method 1
# also set JAX_PLATFORMS=cpu, which keeps a CUDA build of jax from starting its `cuda` thread).
METHOD = 2


def user_path() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(os.environ.get("LAUNCHER_CALIBRATION") or Path(cache) / "launcher" /
                "calibration.json")


def read_calibration(root: Path) -> list[dict[str, Any]]:
    """Every usable entry: the user's (for this host) first, then an image's (measured where it
    was built). Malformed entries are left out."""
    from launcher.contract import CALIBRATION_FILE

    paths = ([user_path(), Path(CALIBRATION_FILE)] if str(root) == "/"
             else [root / CALIBRATION_FILE.lstrip("/")])
    import socket

    host = socket.gethostname()
    out: list[dict[str, Any]] = []
    for path in paths:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        entries = data.get("entries") if isinstance(data, dict) else None
        if not isinstance(entries, list):
            continue
        image = path != user_path()
        out += [dict(e, file=str(path)) for e in entries
                if _usable(e) and (image or e.get("host") == host)]
    return out


def _usable(e: Any) -> bool:
    settings = e.get("settings") if isinstance(e, dict) else None
    return (isinstance(e, dict) and isinstance(e.get("framework"), str)
            and isinstance(e.get("cpus"), int) and isinstance(e.get("peak"), int)
            and isinstance(settings, dict)
            and all(isinstance(v, int) for v in settings.values()))
