"""Committed outputs, as Hadoop's and Spark's output committers do it (standard library only: it
runs in images too). A chunk writes into an attempt folder, `CHUNK/attempt-N`; only when the
chunk succeeded is a `_SUCCESS` marker written into it and the folder renamed to `CHUNK/out`,
one rename(2), before the ledger says done. Anything that reads the job's folder sees a chunk's
`out` whole, or not at all; a killed attempt leaves only its attempt folder (cleared when the
chunk runs again)."""

from __future__ import annotations

import json
import os
import shutil
import time
from typing import Any

FINAL = "out"
ATTEMPT = "attempt-"
MARKER = "_SUCCESS"


def final_dir(cdir: str) -> str:
    return os.path.join(cdir, FINAL)


def attempts(cdir: str) -> list[str]:
    try:
        names = sorted(n for n in os.listdir(cdir) if n.startswith(ATTEMPT))
    except FileNotFoundError:
        return []
    return [os.path.join(cdir, n) for n in names]


def committed(cdir: str) -> bool:
    return os.path.isfile(os.path.join(final_dir(cdir), MARKER))


def new_attempt(cdir: str, tag: str, clear: bool = True) -> str:
    """A fresh, empty attempt folder in chunk folder `cdir`. `clear`: the earlier attempts'
    leftovers go, and a final output the ledger does not count (the chunk runs again)."""
    if clear:
        for old in [*attempts(cdir), final_dir(cdir)]:
            if os.path.isdir(old):
                shutil.rmtree(old)
    path = os.path.join(cdir, ATTEMPT + tag)
    if os.path.isdir(path):
        shutil.rmtree(path)
    os.makedirs(path)
    return path


def commit(attempt: str, info: dict[str, Any]) -> str:
    """The attempt folder, with `_SUCCESS` (the JSON `info`) inside, renamed to `out` beside
    it; returns the final path. Another attempt's output committed first wins (this one is
    dropped)."""
    cdir = os.path.dirname(attempt)
    final = final_dir(cdir)
    marker = os.path.join(attempt, MARKER)
    with open(marker + ".tmp", "w") as f:
        json.dump({**info, "committed": time.time()}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(marker + ".tmp", marker)
    _sync(attempt)
    try:
        os.rename(attempt, final)  # atomic: `out` appears whole, marker included
    except OSError:
        if not committed(cdir):
            raise
        shutil.rmtree(attempt, ignore_errors=True)
    _sync(cdir)
    return final


def recover(cdir: str, info: dict[str, Any]) -> bool:
    """After the launcher died: True when the chunk's output is committed, committing its
    finished attempt first if the launcher died before the rename (call only for a chunk
    whose exit file says it succeeded)."""
    if committed(cdir):
        for left in attempts(cdir):
            shutil.rmtree(left, ignore_errors=True)
        return True
    found = attempts(cdir)
    if len(found) != 1:
        return False
    commit(found[0], info)
    return True


def _sync(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)

