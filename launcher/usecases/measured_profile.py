"""`launcher run --write-profile FILE` for any workload, a user's own command included: a
profile extending the run's, with what the run measured. workers.memory from the memory peak
(the kernel's, where the run's own cgroup counted it; else the sampled RSS of its processes),
workers.threads from the threads peak (the kernel's pids.peak where the run's cgroup counted
it), and the growth per cycle as the growth watch measured it; each with where it came from and
the limits it was measured under."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from launcher.caps.resolve import Resolved
from launcher.errors import LauncherError
from launcher.units import format_size, mib_up

HEADROOM = 1.25  # a measured peak, plus a quarter


def measured_sections(summary: dict[str, Any], r: Resolved) -> tuple[dict[str, Any], list[str]]:
    """The profile sections and the notes (comments) that say where each value came from."""
    sections: dict[str, Any] = {}
    notes: list[str] = []
    workers: dict[str, Any] = {}
    memory, memory_from = _memory_peak(summary)
    procs = r.caps.processes
    if memory:  # one process's peak (the schema's), with headroom
        each = -(-memory // procs)
        workers["memory"] = mib_up(int(each * HEADROOM))
        per = f" / {procs} processes" if procs > 1 else ""
        notes.append(f"workers.memory: {memory_from} {format_size(memory)}{per} + 25% = "
                     f"{workers['memory']}.")
    threads, threads_from = _threads_peak(summary, procs, r.caps.estimate.extra)
    if threads:
        workers["threads"] = threads
        notes.append(f"workers.threads: {threads_from}.")
    if not workers:
        raise LauncherError("--write-profile: the run left no memory or threads peak to write "
                            "(it ended before its first sample; a shorter --interval samples "
                            "sooner)")
    sections["workers"] = workers
    notes += [f"growth: {g}" for g in _growth_found(summary.get("growth") or {})]
    notes.append(f"measured under: {limits_words(r)}; run {summary.get('run_id')}.")
    return sections, notes


def _memory_peak(summary: dict[str, Any]) -> tuple[int | None, str]:
    kernel = summary.get("memory_peak_kernel")
    if isinstance(kernel, int) and kernel > 0:
        return kernel, "the run cgroup's memory peak (kernel)"
    rss = (summary["peaks"].get("rss_bytes") or {}).get("peak")
    return rss, "the peak RSS of its processes (sampled; no cgroup of its own counted memory)"


def _threads_peak(summary: dict[str, Any], processes: int,
                  extra: int) -> tuple[int | None, str]:
    """One process's peak: the run's, less the supervisor and the workload's own threads
    (the estimate adds both again), shared by its processes."""
    pids = summary["peaks"].get("pids_current") or {}
    kernel = pids.get("kernel_peak")
    peak = kernel or (summary["peaks"].get("threads") or {}).get("peak")
    if not peak:
        return None, ""
    each = max(1, -(-(peak - 1 - extra) // processes))
    how = "the run cgroup's pids.peak (kernel)" if kernel else "the sampled threads peak"
    own = f" and its own {extra}" if extra else ""
    per = f" over {processes} processes" if processes > 1 else ""
    return each, f"{how} {peak}, less the supervisor{own}{per} = {each}"


def _growth_found(growth: dict[str, Any]) -> list[str]:
    """Each trend the growth watch found, per cycle, as the run's report says it (else that
    it found none)."""
    from launcher.telemetry.growth import Trend
    from launcher.telemetry.growth_words import step
    from launcher.telemetry.series import SERIES

    unit = growth.get("unit") or "cycle"
    out = []
    for t in growth.get("trends") or ():
        trend = Trend.from_json(t)
        if trend.grows and trend.series in SERIES:
            pool = f" ({trend.pool})" if trend.pool else ""
            out.append(f"{SERIES[trend.series].word} {step(trend)}{pool}, fitted over "
                       f"{unit}s {trend.first}-{trend.last}.")
    if not out:
        cycles = growth.get("cycles_count") or 0
        plural = "s" if cycles > 1 else ""
        out.append(f"none measured ({cycles} {unit}{plural})" if cycles else
                   "no cycles marked (the output named none; --cycle REGEX marks them)")
    return out


def limits_words(r: Resolved) -> str:
    """The limits the run was measured under, in units."""
    lim = r.caps.limits
    pids, memory = lim.get("pids"), lim.get("memory")
    shown = [f"pids {pids.value if pids and pids.value else 'none'}",
             f"memory {format_size(memory.value) if memory and memory.value else 'none'}",
             f"{r.caps.processes} process(es)", f"profile {r.caps.profile}"]
    return ", ".join(shown)


def write_measured_profile(path: Path, r: Resolved, run_dir: Path, by: str) -> str:
    """Write the profile; the line that says what it measured and how to use it."""
    from launcher.profiles.writer import shown, write_profile

    summary = json.loads((run_dir / "summary.json").read_text())
    sections, notes = measured_sections(summary, r)
    write_profile(path, r.profile, by, sections, notes)
    w = sections["workers"]
    said = ", ".join(f"workers.{k} {v}" for k, v in w.items())
    growth = [g.rstrip(".") for g in _growth_found(summary.get("growth") or {})]
    return (f"wrote {path}: {said}; growth: {'; '.join(growth[:2])} (measured under "
            f"{limits_words(r)}); `launcher plan --profile {shown(path)}`")
