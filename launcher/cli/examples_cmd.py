"""`launcher examples`: the example jobs and the base image recipe that ship in the package,
listed or written out (a wheel has no source tree to find them in)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from launcher.cli.output import print_json
from launcher.errors import LauncherError
from launcher.shipped import base_image_recipe, shipped

RECIPE = "base-image.sh"


def _items() -> dict[str, Path]:
    found = {p.name: p for p in sorted(shipped("examples").iterdir()) if p.is_dir()}
    return {**found, RECIPE: base_image_recipe()}


def _about(path: Path) -> str:
    """An example's first comment line (job.yaml's), or the recipe's usage line."""
    source = path / "job.yaml" if path.is_dir() else path
    for line in source.read_text().splitlines():
        if line.startswith("# ") and "usage" not in line.lower():
            return line[2:].strip()
    return ""


def examples(out: Path | None, names: list[str], as_json: bool, force: bool = False) -> int:
    items = _items()
    unknown = [n for n in names if n not in items]
    if unknown:
        raise LauncherError(f"no example {unknown[0]!r} (known: {', '.join(items)})")
    chosen = {n: items[n] for n in names or items}
    if out is None:
        if as_json:
            print_json([{"name": n, "about": _about(p)} for n, p in chosen.items()])
        else:
            for n, p in chosen.items():
                print(f"{n:20} {_about(p)}")
            print("write them out with `launcher examples --out DIR [NAME...]`")
        return 0
    targets = {n: out / n for n in chosen}
    taken = [str(t) for t in targets.values() if t.exists()]
    if taken and not force:  # nothing half-written: check every target first
        raise LauncherError(f"{taken[0]} exists: launcher examples replaces nothing "
                            f"(--force does)")
    out.mkdir(parents=True, exist_ok=True)
    for n, src in chosen.items():
        dest = targets[n]
        if src.is_dir():
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "runs"))
        else:
            shutil.copy2(src, dest)
        print(f"wrote {dest}", file=sys.stderr if as_json else sys.stdout)
    if as_json:
        print_json({"out": str(out), "written": [str(t) for t in targets.values()]})
    return 0
