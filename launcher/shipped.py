"""Data shipped inside the package (profiles/, images/, compose/, examples/ and scripts/ of the
source tree, linked under launcher/_shipped/ and copied into the wheel; of scripts/, only the
base image recipe), read through importlib.resources."""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from pathlib import Path

KINDS = ("profiles", "images", "compose", "examples")


@cache  # asked for once per value of a profile (display_path): ~0.3 ms each
def shipped(kind: str) -> Path:
    """The folder of shipped `kind` files (resolved: the source tree's, or the installed
    package's)."""
    if kind not in KINDS:
        raise ValueError(f"unknown shipped data {kind!r}")
    return Path(str(files("launcher") / "_shipped" / kind)).resolve()


def pythonpath(inherited: str | None = None) -> str:
    """PYTHONPATH for a child interpreter that must import this launcher (the one running, an
    editable checkout or a wheel) ahead of what it inherited."""
    import os

    here = str(Path(__file__).resolve().parent.parent)
    return os.pathsep.join([here, *filter(None, [inherited])])


def base_image_recipe() -> Path:
    """scripts/base-image.sh: a local Debian base image with no registry (debootstrap)."""
    return Path(str(files("launcher") / "_shipped" / "base-image.sh")).resolve()
