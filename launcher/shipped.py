"""Data shipped inside the package (profiles/, images/, compose/, examples/ and scripts/ of the
source tree, linked under launcher/_shipped/ and copied into the wheel; of scripts/, only the
base image recipe). The package is files on disk (a wheel, `pip install --target`, an editable
checkout; never a zip), so its folder is found from this file, without importlib.resources
(~5 ms of every start)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

KINDS = ("profiles", "images", "compose", "examples")


HERE = Path(__file__).resolve().parent


@lru_cache(maxsize=None)  # asked for once per value of a profile (display_path)
def shipped(kind: str) -> Path:
    """The folder of shipped `kind` files (resolved: the source tree's, or the installed
    package's)."""
    if kind not in KINDS:
        raise ValueError(f"unknown shipped data {kind!r}")
    return (HERE / "_shipped" / kind).resolve()


def pythonpath(inherited: str | None = None) -> str:
    """PYTHONPATH for a child interpreter that must import this launcher (the one running, an
    editable checkout or a wheel) ahead of what it inherited."""
    import os

    here = str(HERE.parent)
    return os.pathsep.join([here, *filter(None, [inherited])])


def base_image_recipe() -> Path:
    """scripts/base-image.sh: a local Debian base image with no registry (debootstrap)."""
    return (HERE / "_shipped" / "base-image.sh").resolve()
