"""The leaf move undone (cgroup v2): launcher moved its own processes into a leaf so that it
could enable controllers in its cgroup (placement.py, step 2); this puts that cgroup back as
it was. Standard library only: the supervisor in an image undoes the moves of a launcher that
is gone (contract.CGROUP_UNDO)."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

LEAF = "launcher-leaf"  # where launcher moved its own processes (placement.py)


def undo_leaf(caller: Path | str, controllers: tuple[str, ...] | list[str],
              leaf: Path | str) -> bool:
    """Put the caller's cgroup back as launcher found it after a leaf move (cgroup v2): the
    controllers it enabled there off, every process of the leaf back into it, the leaf gone.
    A process can then join the caller's cgroup again (`docker exec` into a container). Does
    nothing while another cgroup below the caller still needs the controllers (a run not yet
    removed, a second launcher's): False then."""
    caller, leaf = str(caller), str(leaf)
    try:
        others = [e.name for e in os.scandir(caller) if e.is_dir() and e.path != leaf]
    except OSError:
        return False
    if others:
        return False
    try:
        if controllers:
            _write_retrying(os.path.join(caller, "cgroup.subtree_control"),
                            " ".join(f"-{c}" for c in controllers))
        try:
            with open(os.path.join(leaf, "cgroup.procs")) as f:
                pids = f.read().split()
        except FileNotFoundError:
            pids = []
        for pid in pids:
            with contextlib.suppress(ProcessLookupError), \
                    open(os.path.join(caller, "cgroup.procs"), "w") as f:
                f.write(pid)
        os.rmdir(leaf)
    except FileNotFoundError:
        return True  # already undone
    except OSError:
        return False
    return True


def undo_leaves(encoded: str) -> None:
    """The leaf moves a launcher that is gone would have undone (contract.CGROUP_UNDO)."""
    from launcher import contract as c

    for caller, controllers, leaf in c.decode_undo(encoded):
        undo_leaf(caller, controllers, leaf)


def _write_retrying(path: str, text: str, timeout: float = 3.0) -> None:
    """A controller cannot be turned off while a just-removed child is still dying (EBUSY for
    a moment after its rmdir): try again until `timeout`."""
    import errno

    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(path, "w") as f:
                f.write(text)
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.02)
