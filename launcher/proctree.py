"""A process's descendants, read from /proc. Standard library only: the supervisor in an image
imports it, and so does the cgroup placement (launcher's own processes)."""

from __future__ import annotations

import os


def descendants(pid: int) -> list[int]:
    """Every descendant of `pid` (children first found, depth first), from /proc."""
    out: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    kids = [int(c) for c in f.read().split()]
            except OSError:
                continue
            out.extend(kids)
            todo.extend(kids)
    return out


def is_init() -> bool:
    """This process is its PID namespace's init: a container's PID 1 (the reaper of every
    orphan, protected from its own signals, no job above it). Decided here alone."""
    return os.getpid() == 1
