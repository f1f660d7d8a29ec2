"""Explain why a workload ended, in one sentence, from the cgroup's own counters."""

from __future__ import annotations

import signal
from pathlib import Path

from launcher.probe.cgroup import (
    find_chains,
    limit_dir,
    nearest,
    pids_binding,
    read_int_or_none,
    read_oom_kills,
)
from launcher.supervise.evidence import Peaks, Start
from launcher.units import format_size


class KernelCounters:
    """Cgroup counters read before the workload starts and again after it ends. (A plain
    class: the supervisor imports this at every start, and dataclasses costs ~10 ms.)"""

    def __init__(self) -> None:
        self.pids_max: int | None = None
        self.pids_peak: int | None = None  # the binding level's, for a limit that was hit
        self.pids_peak_nearest: int | None = None  # the nearest level's: the run's own, if any
        self.pids_events_max: int | None = None  # fork/clone refusals because of pids.max
        self.pids_events: dict[str, int] = {}  # per cgroup along the chain
        self.pids_where: str | None = None  # the cgroup whose pids.max binds
        self.oom_kills: int | None = None
        self.memory_limit: int | None = None
        self.memory_peak: int | None = None
        self.host_oom_kills: int | None = None  # the kernel's, every cgroup's: /proc/vmstat


def _events(path: Path, key: str) -> int | None:
    try:
        for line in path.read_text().splitlines():
            k, _, v = line.partition(" ")
            if k == key:
                return int(v)
    except (OSError, ValueError):
        return None
    return None


def read_counters(root: Path = Path("/")) -> KernelCounters:
    c = KernelCounters()
    c.host_oom_kills = _events(root / "proc/vmstat", "oom_kill")
    try:
        chains = find_chains(root)
    except Exception:  # noqa: BLE001 - a diagnosis must never crash the supervisor
        return c
    if "pids" in chains:
        ch = chains["pids"]
        # the limit that binds is the tightest along the chain, and its counters are that
        # cgroup's; kernel 6.1 counts a refusal in the task's own cgroup, newer kernels in
        # the one whose limit was hit: every level's pids.events is read
        _, _, binding = pids_binding(ch)  # the least headroom: the level that is hit
        found = binding / "pids.max" if binding else nearest(ch, "pids.max")
        c.pids_max = read_int_or_none(found) if found else None
        c.pids_where = str(found.parent) if found else None
        peak = found.parent / "pids.peak" if found else None
        if peak is None or not peak.exists():
            peak = nearest(ch, "pids.peak")
        c.pids_peak = read_int_or_none(peak) if peak else None
        near = nearest(ch, "pids.peak")
        c.pids_peak_nearest = read_int_or_none(near) if near else None
        for d in ch.dirs:
            n = _events(d / "pids.events", "max")
            if n is not None:
                c.pids_events[str(d)] = n
        c.pids_events_max = max(c.pids_events.values()) if c.pids_events else None
    if "memory" in chains:
        ch = chains["memory"]
        v2 = ch.version == "v2"
        events = nearest(ch, "memory.events" if v2 else "memory.oom_control")
        try:
            c.oom_kills = read_oom_kills(events.parent, v2) if events else None
        except Exception:  # noqa: BLE001
            c.oom_kills = None
        name = "memory.max" if v2 else "memory.limit_in_bytes"
        found = limit_dir(ch, name)
        found = found / name if found else nearest(ch, name)
        limit = read_int_or_none(found) if found else None
        c.memory_limit = limit if limit and limit < (1 << 62) else None
        found = nearest(ch, "memory.peak" if v2 else "memory.max_usage_in_bytes")
        c.memory_peak = read_int_or_none(found) if found else None
    return c


def explain(returncode: int, before: KernelCounters, after: KernelCounters,
            start: Start | None = None,
            peaks: Peaks | None = None) -> str:
    """One sentence: the pids limit, the memory limit, a signal, another limit on threads
    (with the limits the workload started under and the samples of it), or its own status."""
    return diagnose(returncode, before, after, start, peaks)[1]


def diagnose(returncode: int, before: KernelCounters, after: KernelCounters,
             start: Start | None = None,
             peaks: Peaks | None = None) -> tuple[str, str]:
    """(the reason as a code, explain's sentence). Codes: oom, pids, host-oom, sigkill,
    signal, exit (its own status, no limit seen), ok, exit-pids (it survived refusals), and
    causes.thread_cause's (nproc, as, data, threads-max, pid-max, clone3)."""
    ooms = (after.oom_kills or 0) - (before.oom_kills or 0)
    if ooms > 0:
        limit = f" of {format_size(after.memory_limit)}" if after.memory_limit else ""
        peak = f" (peak {format_size(after.memory_peak)})" if after.memory_peak else ""
        threads = (f"; it ran {peaks.threads} threads, each charging its kernel stack and the "
                   f"stack it touched" if peaks is not None and peaks.threads >= 100 else "")
        return "oom", (
            f"the memory limit{limit} killed the workload: the cgroup's OOM-kill counter "
            f"rose by {ooms}{peak}{threads}; raise limits.memory above the peak it needs "
            f"(`launcher run --write-profile FILE` measures it), or make it need less (fewer "
            f"processes, a smaller batch).")
    refused = max([n - before.pids_events.get(d, 0) for d, n in after.pids_events.items()]
                  or [(after.pids_events_max or 0) - (before.pids_events_max or 0)])
    where = f" (the pids.max of {after.pids_where})" if after.pids_where else ""
    peak = (f"pids.current hit {after.pids_peak}/{after.pids_max}"
            if after.pids_peak is not None else f"pids.current reached {after.pids_max}")
    if refused > 0 and returncode != 0:
        return "pids", (
            f"the pids limit was reached: {peak} and the kernel refused {refused} thread or "
            f"process creation(s) (EAGAIN){where}; lower the thread caps or raise "
            f"limits.pids.")
    host_ooms = (after.host_oom_kills or 0) - (before.host_oom_kills or 0)
    if returncode == -signal.SIGKILL:
        if host_ooms > 0:
            return "host-oom", (
                f"the kernel's OOM killer killed the workload: the host ran out of memory "
                f"(/proc/vmstat oom_kill rose by {host_ooms}; no cgroup's limit was hit); "
                f"set limits.memory below the host's free memory, or run fewer processes.")
        return "sigkill", (
            "the workload was killed by SIGKILL, and no OOM kill was counted (its cgroup's "
            "or the kernel's): something outside it sent the signal (a kill -9, a "
            "scheduler or orchestrator stopping it, a container runtime's stop timeout); "
            "its log says who: give it a longer stop timeout, or stop it with SIGTERM.")
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return "signal", _signal_words(-returncode, name)
    end = ("the workload exited with status 0" if returncode == 0 else
           f"the workload exited with its own status {returncode}")
    if refused > 0:  # it survived the refusals (a thread it did without): still worth saying
        return "exit-pids", (
            f"{end}, but the pids limit was reached on the way: {peak} and the kernel "
            f"refused {refused} thread or process creation(s) (EAGAIN){where}; lower the "
            f"thread caps or raise limits.pids.")
    if returncode != 0 and start is not None and peaks is not None:
        from launcher.supervise.causes import thread_cause

        cause = thread_cause(start, peaks, after.pids_peak)
        if cause:
            return cause[0], f"{end}; {cause[1]}"
    return ("ok" if returncode == 0 else "exit"), f"{end}."


_CRASHES = (signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT)


def _signal_words(signum: int, name: str) -> str:
    """A crash gets its fix; a stop asked for (Ctrl-C, SIGTERM, a reader gone) is news alone."""
    if signum not in _CRASHES:
        return f"the workload was killed by {name}."
    return (f"the workload was killed by {name}: it crashed in native code (a framework, a "
            f"driver, an extension) with no limit hit; run it with PYTHONFAULTHANDLER=1 to see "
            f"where (a framework built for another CUDA or ROCm than the driver's is a common "
            f"cause).")
