"""After a run: its growth record for summary.json, and what it changes in the diagnosis. A
death that followed growth says so (the growth, the pool, the cycle, and that a higher limit
only delays it); a run stopped before a limit says why, with exit status 75; a thread failure
no sample saw is named from the workload's own words."""

from __future__ import annotations

from typing import Any

from launcher.telemetry.census import fix_for
from launcher.telemetry.failures import likeliest
from launcher.telemetry.growth import SERIES, Trend, death_clause, died_in, to_json, trends
from launcher.telemetry.growth_watch import STOPPED_STATUS
from launcher.threadpools import MEMORY_FIX

# the supervisor's reason -> the series that ran into it, and the limit in words where the
# series' own limit is not the one that was hit
DIED_OF = {"pids": ("threads", None), "exit-pids": ("threads", None),
           "nproc": ("threads", "RLIMIT_NPROC"), "threads-max": ("threads", "kernel.threads-max"),
           "oom": ("memory_bytes", None), "as": ("vm_size_bytes", None),
           "data": ("vm_data_bytes", None)}


def growth_record(rows: list[dict[str, Any]], watched: dict[str, Any], ended: dict[str, Any],
                  *, status: int) -> dict[str, Any]:
    """{"status": the run's exit status, "diagnosis": a new one or None, and the growth
    record: unit, cycles, trends, what was said, the stop, the workload's failure words}."""
    end = rows[-1]["t"] if rows else None
    unit, cycles, found = trends(rows, now=end, ended=True)
    record: dict[str, Any] = {**to_json(unit, cycles, found), **watched, "status": status,
                              "diagnosis": None, "limit_diagnosis": ended.get("diagnosis")}
    if watched.get("stopped"):
        stopped = watched["stopped"]
        record["status"] = STOPPED_STATUS
        record["diagnosis"] = (f"{stopped['why']}; the workload ended with status {status} "
                               f"after the SIGTERM (launcher exits {STOPPED_STATUS}: run it "
                               f"again in a fresh process, or fix the growth).")
        return record
    reason = ended.get("reason")
    if reason in DIED_OF:
        record["diagnosis"] = grew_to_death(found, cycles, reason, ended)
    elif reason == "exit" and watched.get("failure_text"):
        clause = likeliest(watched["failure_text"], ended.get("limits_at_start") or {})
        if clause:
            record["likeliest"] = clause
            record["diagnosis"] = f"{str(ended.get('diagnosis', '')).rstrip('.')}; {clause}."
    return record


def grew_to_death(found: list[Trend], cycles: list[Any], reason: str,
                  ended: dict[str, Any]) -> str | None:
    key, limit_word = DIED_OF[reason]
    if key == "memory_bytes" and not any(t.series == key for t in found):
        key = "rss_bytes"  # no memory cgroup of its own: the RSS
    t = next((t for t in found if t.series == key and t.grows), None)
    if t is None:
        return None
    fix = t.fix or (MEMORY_FIX if SERIES[key].in_bytes else fix_for(t.pool))
    return death_clause(t, died_in(cycles), fix, limit_word=limit_word) + "."
