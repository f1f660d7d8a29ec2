"""`launcher examples`: the shipped examples (launcher/usecases/examples.py) listed, or written
out and said so."""

from __future__ import annotations

import sys
from pathlib import Path

from launcher.cli.output import print_json


def examples(out: Path | None, names: list[str], as_json: bool, force: bool = False) -> int:
    from launcher.usecases.examples import about, chosen, write

    items = chosen(names)
    if out is None:
        if as_json:
            print_json([{"name": n, "about": about(p)} for n, p in items.items()])
        else:
            for n, p in items.items():
                print(f"{n:20} {about(p)}")
            print("write them out with `launcher examples --out DIR [NAME...]`")
        return 0
    written = write(out, items, force=force)
    for dest in written:
        print(f"wrote {dest}", file=sys.stderr if as_json else sys.stdout)
    if as_json:
        print_json({"out": str(out), "written": [str(t) for t in written]})
    return 0
