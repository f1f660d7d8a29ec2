"""`launcher profiles list | show | validate`: the profiles use case's findings
(launcher/usecases/profiles.py) in words or JSON."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from launcher.cli.declare import JSON, command
from launcher.cli.output import print_json, table
from launcher.flags import Declared, Flag
from launcher.units import format_size


def list_profiles(*, as_json: bool) -> int:
    from launcher.usecases.profiles import list_profiles as found

    rows = found()
    if as_json:
        print_json(rows)
        return 0
    print(table([(r["name"], r["error"] and "INVALID: " + r["error"] or r["description"])
                 for r in rows], indent=""))
    return 0


def show(*, name: str, as_json: bool) -> int:
    from launcher.usecases.profiles import display_path
    from launcher.usecases.profiles import show as merged

    p = merged(name)
    if as_json:
        print_json({"name": p.name, "path": display_path(p.path),
                    "file": str(p.path.resolve()), "chain": p.chain,
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
    from launcher.usecases.profiles import kind_of

    if kind_of(key) == "size" and isinstance(v, int):
        return format_size(v)
    return repr(v) if isinstance(v, str) and (not v or v.strip() != v) else str(v)


def validate(*, files: tuple[Path, ...], as_json: bool = False) -> int:
    from launcher.usecases.profiles import validate as check

    checked = check(list(files))
    bad = sum(c.error is not None for c in checked)
    if as_json:
        print_json([{"file": str(c.file), "ok": c.error is None, "error": c.error}
                    for c in checked])
        return 1 if bad else 0
    for c in checked:
        if c.error is None:
            print(f"ok: {c.file}")
            continue
        for line in c.error.splitlines():
            print(f"error: {line}", file=sys.stderr)
    return 1 if bad else 0


LIST = command("list", None, list_profiles, own=(JSON,), help="List the profiles found (user "
               "folders first, then the shipped ones).")
SHOW = command("show", None, show, own=(Declared("name", Flag((), metavar="NAME"),
                                                 dataclasses.MISSING), JSON),
               help="Show a profile after `extends` is merged, with the file and line of every "
                    "value.")
VALIDATE = command("validate", None, validate, own=(
    Declared("files", Flag((), "Profile files, or names as --profile takes them.", kind="path",
                           metavar="PROFILE...", repeat=True), dataclasses.MISSING), JSON),
    help="""Check profiles; print one line per error, exit 1 if any is invalid.

--json: a list of {"file", "ok", "error"} (error: the same one-line message, or null).""")
