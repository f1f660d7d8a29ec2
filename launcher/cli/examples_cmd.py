"""`launcher examples`: the shipped examples (launcher/usecases/examples.py) listed, or written
out and said so."""

from __future__ import annotations

import sys
from pathlib import Path

from launcher.cli.declare import JSON, command
from launcher.cli.output import print_json
from launcher.flags import Declared, Flag


def examples(*, names: tuple[str, ...], out: Path | None, force: bool, as_json: bool) -> int:
    from launcher.usecases.examples import about, chosen, write

    items = chosen(list(names))
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


COMMAND = command("examples", None, examples, own=(
    Declared("names", Flag((), "Only these (default: all).", metavar="[NAME]...", repeat=True),
             ()),
    Declared("out", Flag(("--out", "-o"), "Write them into DIR (each example a folder; the "
                         "recipe a file).", kind="path", metavar="DIR"), None),
    Declared("force", Flag(("--force",), "Replace what is already in DIR under the same names.",
                           kind="bool"), False),
    JSON), help="""List the example jobs and the base image recipe shipped with launcher, or
write them out (`launcher examples --out . score-survivors`; `launcher examples --out .
base-image.sh` then `bash base-image.sh` builds launcher-base:bookworm with no registry).""")
