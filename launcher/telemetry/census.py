"""A census of a process tree's threads: each thread's name, grouped into the pools that own
them as the registered frameworks and GPU vendors declare them (`thread_pools`). Read at each
cycle boundary and at a new peak, not at every sample: one /proc read per thread."""

from __future__ import annotations

import functools
import os
import re
from collections import Counter
from collections.abc import Iterable
from typing import Dict

from launcher.threadpools import UNNAMED, UNNAMED_FIX, ThreadPool

Census = Dict[str, Dict[str, int]]  # pool label -> {thread name: count}


@functools.lru_cache(maxsize=None)
def declared() -> tuple[ThreadPool, ...]:
    """Every registered framework's and GPU vendor's pools, in registry order."""
    from launcher.frameworks import get, names
    from launcher.vendors import all_vendors

    pools: list[ThreadPool] = []
    for name in names():
        pools += get(name).thread_pools
    for vendor in all_vendors():
        pools += vendor.thread_pools
    return tuple(pools)


@functools.lru_cache(maxsize=None)
def _compiled(pools: tuple[ThreadPool, ...]) -> tuple[tuple[re.Pattern[str], ThreadPool], ...]:
    return tuple((re.compile(p.pattern), p) for p in pools)


def names_of(pids: Iterable[int], proc: str = "/proc") -> tuple[Counter[str], set[str]]:
    """(thread name -> count over the processes, the processes' own names)."""
    raw: Counter[bytes] = Counter()
    mains: set[str] = set()
    for pid in pids:
        task = f"{proc}/{pid}/task/"
        try:
            tids = os.listdir(task)
        except OSError:
            continue  # gone
        for tid in tids:  # os.open and os.read: a third of open()'s cost, per thread
            try:
                fd = os.open(task + tid + "/comm", os.O_RDONLY)
            except OSError:
                continue  # ended while we looked
            try:
                name = os.read(fd, 64)
            except OSError:
                continue
            finally:
                os.close(fd)
            raw[name] += 1
            if tid == str(pid):
                mains.add(name.decode(errors="replace").rstrip("\n"))
    names = Counter({k.decode(errors="replace").rstrip("\n"): v for k, v in raw.items()})
    return names, mains


def group(names: Counter[str], mains: set[str],
          pools: tuple[ThreadPool, ...] | None = None) -> Census:
    """Names into pools: a declared pattern's label; a process's own name (a thread that never
    named itself, or the main thread) is `unnamed`; any other name is its own pool."""
    out: Census = {}
    for name, count in sorted(names.items()):
        label = next((p.label for rx, p in _compiled(pools if pools is not None else declared())
                      if rx.match(name)), None)
        if label is None:
            label = UNNAMED if name in mains else name
        out.setdefault(label, {})[name] = count
    return out


def fix_for(label: str | None, pools: tuple[ThreadPool, ...] | None = None) -> str:
    """How to stop a pool growing: its declaration's words, else the generic ones."""
    for p in pools if pools is not None else declared():
        if p.label == label and p.fix:
            return p.fix
    return UNNAMED_FIX


@functools.lru_cache(maxsize=None)
def _libraries() -> tuple[tuple[str, bytes, str, str, str], ...]:
    from launcher.frameworks import get, names

    return tuple((f.label, f.loaded_from.encode(), f.unnamed_pools, f.growth_fix, f.files_fix)
                 for f in (get(n) for n in names()) if f.loaded_from)


def loaded(pid: int, proc: str = "/proc", first: str | None = None
           ) -> dict[str, dict[str, str]]:
    """The frameworks whose library a process has mapped, each with whose its unnamed threads
    most likely are and how to stop its pools growing; `first` (the run's framework, by
    label) before the others (Keras 3 maps jaxlib beside TensorFlow's library)."""
    try:
        with open(f"{proc}/{pid}/maps", "rb") as f:
            maps = f.read()
    except OSError:
        return {}
    found = {label: {"unnamed": unnamed, "fix": fix, **({"files_fix": files} if files else {})}
             for label, lib, unnamed, fix, files in _libraries() if lib in maps}
    return dict(sorted(found.items(), key=lambda kv: kv[0] != first))


def census(pids: Iterable[int]) -> Census:
    names, mains = names_of(pids)
    return group(names, mains)
