"""`launcher profiles list | show | validate`."""

from __future__ import annotations

import sys
from pathlib import Path

from launcher.cli.output import print_json, table
from launcher.errors import ProfileError
from launcher.profiles.loader import available, display_path, load_profile


def list_profiles(as_json: bool) -> int:
    rows = []
    for name, path in available().items():
        try:
            p = load_profile(path)
            rows.append({"name": name, "path": display_path(path), "extends": p.chain[:-1],
                         "description": p.get("description", ""), "error": None})
        except ProfileError as exc:
            rows.append({"name": name, "path": display_path(path), "extends": [],
                         "description": "", "error": str(exc)})
    if as_json:
        print_json(rows)
        return 0
    print(table([(r["name"], r["error"] and "INVALID: " + r["error"] or r["description"])
                 for r in rows], indent=""))
    return 0


def show(name: str, as_json: bool) -> int:
    p = load_profile(Path(name) if name.endswith((".yaml", ".yml")) else name)
    if as_json:
        print_json({"name": p.name, "path": display_path(p.path), "chain": p.chain,
                    "profile": p.data, "origin": p.origin})
        return 0
    print(f"# {p.name}: {' -> '.join(p.chain)}  ({display_path(p.path)})")
    for section, value in p.data.items():
        if isinstance(value, dict):
            print(f"{section}:")
            rows = [(f"  {k}:", _fmt(v, f"{section}.{k}"), f"# {p.where(f'{section}.{k}')}")
                    for k, v in value.items()]
            if rows:
                print(table(rows, indent=""))
        else:
            print(f"{section}: {_fmt(value)}")
    return 0


def _fmt(v: object, key: str = "") -> str:
    from launcher.profiles.schema import SCHEMA
    from launcher.units import format_size

    section, _, leaf = key.partition(".")
    spec = SCHEMA.get(section)
    kind = spec.get(leaf).kind if isinstance(spec, dict) and spec.get(leaf) else ""
    if kind == "size" and isinstance(v, int):
        return format_size(v)
    return repr(v) if isinstance(v, str) and (not v or v.strip() != v) else str(v)


def validate(files: list[Path]) -> int:
    bad = 0
    for f in files:
        try:
            load_profile(f)
            print(f"ok: {f}")
        except ProfileError as exc:
            bad += 1
            for line in str(exc).splitlines():
                print(f"error: {line}", file=sys.stderr)
    return 1 if bad else 0
