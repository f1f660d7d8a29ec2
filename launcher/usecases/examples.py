"""`launcher examples`: the example jobs and the base image recipe that ship in the package,
listed or written out (a wheel has no source tree to find them in)."""

from __future__ import annotations

import shutil
from pathlib import Path

from launcher.errors import LauncherError
from launcher.shipped import base_image_recipe, shipped

RECIPE = "base-image.sh"


def chosen(names: list[str]) -> dict[str, Path]:
    """The examples named (all, when none is), each with its source."""
    found = {p.name: p for p in sorted(shipped("examples").iterdir()) if p.is_dir()}
    items = {**found, RECIPE: base_image_recipe()}
    unknown = [n for n in names if n not in items]
    if unknown:
        raise LauncherError(f"no example {unknown[0]!r} (known: {', '.join(items)})")
    return {n: items[n] for n in names or items}


def about(path: Path) -> str:
    """An example's first comment line (its job.yaml's, else its README.md's title), or the
    recipe's usage line."""
    source = path if not path.is_dir() else next(
        (p for p in (path / "job.yaml", path / "README.md") if p.is_file()), None)
    if source is None:
        return ""
    for line in source.read_text().splitlines():
        if line.startswith("# ") and "usage" not in line.lower():
            return line[2:].strip()
    return ""


def write(out: Path, items: dict[str, Path], *, force: bool = False) -> list[Path]:
    """The examples copied into `out`; nothing replaced unless `force` (every target checked
    first, so nothing is half-written)."""
    targets = {n: out / n for n in items}
    taken = [str(t) for t in targets.values() if t.exists()]
    if taken and not force:
        raise LauncherError(f"{taken[0]} exists: launcher examples replaces nothing "
                            f"(--force does)")
    out.mkdir(parents=True, exist_ok=True)
    for n, src in items.items():
        dest = targets[n]
        if src.is_dir():
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "runs"))
        else:
            shutil.copy2(src, dest)
    return list(targets.values())
