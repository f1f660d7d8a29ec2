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

MODULES = {"jax": "jax", "torch": "torch", "tf": "tensorflow", "none": "numpy"}
DISTRIBUTIONS = {"jax": ("jax",), "torch": ("torch",), "tf": ("tensorflow", "tensorflow-cpu"),
                 "none": ("numpy",)}


def user_path() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(os.environ.get("LAUNCHER_CALIBRATION") or Path(cache) / "launcher" /
                "calibration.json")


def read_calibration(root: Path) -> list[dict[str, Any]]:
    paths = ([user_path(), Path("/etc/launcher/calibration.json")] if str(root) == "/"
             else [root / "etc/launcher/calibration.json"])
    import socket

    host = socket.gethostname()
    for path in paths:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        entries = data.get("entries") if isinstance(data, dict) else None
        if isinstance(entries, list):
            mine = path != user_path()  # an image's were measured where it was built
            return [dict(e, file=str(path)) for e in entries if isinstance(e, dict) and
                    (mine or e.get("host") == host)]
    return []


def framework_version(framework: str) -> str | None:
    """The installed version of a framework (package metadata: no import)."""
    from importlib.metadata import PackageNotFoundError, version

    for dist in DISTRIBUTIONS.get(framework, ()):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return None
