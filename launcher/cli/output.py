"""Small helpers for printing: JSON for machines, aligned tables for people."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from launcher.usecases.events import Event

_verbose = False


def say(msg: str) -> None:
    """A line for the person at the terminal, on stderr (stdout stays the command's output)."""
    print(f"launcher: {msg}", file=sys.stderr, flush=True)


def set_verbose(on: bool) -> None:
    global _verbose
    _verbose = on


def verbose() -> bool:
    return _verbose


def note(msg: str) -> None:
    """A line that changes nothing for the user (how a choice was made): only with -v."""
    if _verbose:
        say(msg)


def show_event(event: Event) -> None:
    """A use case's line: on stderr (a note only with -v, a warning labelled), or a step of
    the command's own output on stdout."""
    if event.kind == "step":
        print(event.text, flush=True)
    elif event.kind == "note":
        note(event.text)
    elif event.kind == "warning":
        say(f"warning: {event.text}")
    else:
        say(event.text)


# `--detailed-exitcode` (as terraform's): the verdict as the exit status, apart from the
# statuses launcher already gives (1 a mistake, 2 a usage error, 3 an internal error).
VERDICT_STATUS = {"ok": 0, "warn": 4, "refuse": 5}


def verdict_status(level: str, detailed: bool) -> int:
    return VERDICT_STATUS[level] if detailed else 0


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


def table(rows: list[tuple[str, ...]], indent: str = "  ") -> str:
    if not rows:
        return ""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for r in rows:
        cells = [c.ljust(w) for c, w in zip(r, widths, strict=False)] + [r[-1]]
        lines.append(indent + "  ".join(cells).rstrip())
    return "\n".join(lines)


