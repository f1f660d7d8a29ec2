"""The packages installed where this interpreter looks (sys.path), read from their metadata
folders once per process, as importlib.metadata finds them but without importing it (about
20 ms on every command). Standard library only: images import it."""

from __future__ import annotations

import functools
import re
import sys
from pathlib import Path
from typing import NamedTuple


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


@functools.lru_cache(maxsize=1)
def installed() -> dict[str, tuple[str, Path]]:
    """normalized name -> (version, metadata folder); the first on sys.path wins."""
    out: dict[str, tuple[str, Path]] = {}
    for entry in sys.path:
        try:
            folders = [p for p in Path(entry or ".").iterdir()
                       if p.name.endswith((".dist-info", ".egg-info"))]
        except OSError:
            continue
        for folder in folders:
            name, _, version = folder.name.rsplit(".", 1)[0].partition("-")
            if version:
                out.setdefault(normalize(name), (version, folder))
    return out


def version(dist: str) -> str | None:
    found = installed().get(normalize(dist))
    return found[0] if found else None


class EntryPoint(NamedTuple):
    value: str  # "module:attribute" or "module"
    dist: str  # the distribution that declares it (normalized)


OWN = "launcher"
PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"  # a source tree's


@functools.lru_cache(maxsize=None)
def entry_points(group: str) -> dict[str, EntryPoint]:
    """name -> entry point of an entry-point group, from each package's entry_points.txt:
    launcher's own first, then third parties', each by name; the first declaration of a name
    wins. Where launcher itself is not installed (a source tree on PYTHONPATH), its own entries
    are read from the pyproject.toml beside the package."""
    found: dict[str, EntryPoint] = {}
    for dist, path, text in _declarations():
        header = f'[project.entry-points."{group}"]' if path.suffix == ".toml" else f"[{group}]"
        if header not in text:
            continue
        for line in text.split(header, 1)[1].split("\n[", 1)[0].splitlines():
            name, sep, value = line.partition("=")
            if sep and name.strip() and not line.lstrip().startswith(("#", ";")):
                found.setdefault(name.strip().strip('"'),
                                 EntryPoint(value.strip().strip('"'), dist))
    return dict(sorted(found.items(), key=lambda kv: (kv[1].dist != OWN, kv[0])))


GROUPS = "[launcher."  # the opening of every entry-point group launcher reads


@functools.lru_cache(maxsize=1)
def _declarations() -> list[tuple[str, Path, str]]:
    """(distribution, file, text) of each entry_points.txt with a launcher group, read once
    for every group (a run asks for five: one pass over ~90 packages' files is ~1.3 ms);
    where launcher itself is not installed, the pyproject.toml beside the package."""
    out = []
    sources = [(dist, folder / "entry_points.txt") for dist, (_, folder) in installed().items()]
    if OWN not in installed():
        sources.append((OWN, PYPROJECT))
    for dist, path in sources:
        try:
            declared = path.read_text()
        except OSError:
            continue
        if GROUPS in declared or path.suffix == ".toml":
            out.append((dist, path, declared))
    return out


def own_groups() -> list[str]:
    """The launcher groups a source tree's pyproject.toml declares entries in."""
    return re.findall(r'^\[project\.entry-points\."(launcher\.[a-z_]+)"\]$',
                      PYPROJECT.read_text(), re.M)


def plugin_dists() -> dict[str, Path]:
    """normalized name -> metadata folder of every distribution with an entry in a launcher
    group (launcher's own included)."""
    out = {}
    for name, (_, folder) in installed().items():
        try:
            if GROUPS in (folder / "entry_points.txt").read_text():
                out[name] = folder
        except OSError:
            continue
    return out

