"""Explain why a workload ended, in one sentence, from the cgroup's own counters."""

from __future__ import annotations

import signal
from pathlib import Path

from launcher.probe.cgroup import find_chains, nearest, read_int_or_none, read_oom_kills
from launcher.units import format_size


class Counters:
    """Cgroup counters read before the workload starts and again after it ends. (A plain
    class: the supervisor imports this at every start, and dataclasses costs ~10 ms.)"""

    def __init__(self) -> None:
        self.pids_max: int | None = None
        self.pids_peak: int | None = None
        self.pids_events_max: int | None = None  # fork/clone refusals because of pids.max
        self.oom_kills: int | None = None
        self.memory_limit: int | None = None
        self.memory_peak: int | None = None



def _events(path: Path, key: str) -> int | None:
    try:
        for line in path.read_text().splitlines():
            k, _, v = line.partition(" ")
            if k == key:
                return int(v)
    except (OSError, ValueError):
        return None
    return None


def read_counters(root: Path = Path("/")) -> Counters:
    try:
        chains = find_chains(root)
    except Exception:  # noqa: BLE001 - a diagnosis must never crash the supervisor
        return Counters()
    c = Counters()
    if "pids" in chains:
        ch = chains["pids"]
        found = nearest(ch, "pids.max")
        c.pids_max = read_int_or_none(found) if found else None
        found = nearest(ch, "pids.peak")
        c.pids_peak = read_int_or_none(found) if found else None
        found = nearest(ch, "pids.events")
        c.pids_events_max = _events(found, "max") if found else None
    if "memory" in chains:
        ch = chains["memory"]
        v2 = ch.version == "v2"
        events = nearest(ch, "memory.events" if v2 else "memory.oom_control")
        try:
            c.oom_kills = read_oom_kills(events.parent, v2) if events else None
        except Exception:  # noqa: BLE001
            c.oom_kills = None
        found = nearest(ch, "memory.max" if v2 else "memory.limit_in_bytes")
        limit = read_int_or_none(found) if found else None
        c.memory_limit = limit if limit and limit < (1 << 62) else None
        found = nearest(ch, "memory.peak" if v2 else "memory.max_usage_in_bytes")
        c.memory_peak = read_int_or_none(found) if found else None
    return c


def explain(returncode: int, before: Counters, after: Counters) -> str:
    """One sentence: the pids limit, the memory limit, a signal, or the workload's own status."""
    ooms = (after.oom_kills or 0) - (before.oom_kills or 0)
    if ooms > 0:
        limit = f" of {format_size(after.memory_limit)}" if after.memory_limit else ""
        peak = f" (peak {format_size(after.memory_peak)})" if after.memory_peak else ""
        return (f"the memory limit{limit} killed the workload: the cgroup's OOM-kill counter "
                f"rose by {ooms}{peak}.")
    refused = (after.pids_events_max or 0) - (before.pids_events_max or 0)
    if refused > 0 and returncode != 0:
        peak = after.pids_peak if after.pids_peak is not None else after.pids_max
        return (f"the pids limit was reached: pids.current hit {peak}/{after.pids_max} and the "
                f"kernel refused {refused} thread or process creation(s) (EAGAIN); lower the "
                f"thread caps or raise limits.pids.")
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"the workload was killed by {name}."
    end = ("the workload exited with status 0" if returncode == 0 else
           f"the workload exited with its own status {returncode}")
    if refused > 0:  # it survived the refusals (a thread it did without): still worth saying
        peak = after.pids_peak if after.pids_peak is not None else after.pids_max
        return (f"{end}, but the pids limit was reached on the way: pids.current hit "
                f"{peak}/{after.pids_max} and the kernel refused {refused} thread or process "
                f"creation(s) (EAGAIN).")
    return f"{end}."
