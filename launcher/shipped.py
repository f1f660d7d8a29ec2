"""Data shipped inside the package (profiles/, images/, compose/ of the source tree, linked
under launcher/_shipped/ and copied into the wheel), read through importlib.resources."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

KINDS = ("profiles", "images", "compose")


def shipped(kind: str) -> Path:
    """The folder of shipped `kind` files (resolved: the source tree's, or the installed
    package's)."""
    if kind not in KINDS:
        raise ValueError(f"unknown shipped data {kind!r}")
    return Path(str(files("launcher") / "_shipped" / kind)).resolve()
