"""After a run: its growth record for summary.json, and what it changes in the diagnosis. A
death that followed growth says so (the growth, the pool, the cycle, and that a higher limit
only delays it); a run stopped before a limit says why, with exit status 75; a thread failure
no sample saw is named from the workload's own words."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from launcher.telemetry.census import fix_for
from launcher.telemetry.failures import likeliest
from launcher.telemetry.fd_census import FIXES as FILE_FIXES
from launcher.telemetry.growth import Trend, died_in, to_json
from launcher.telemetry.growth_watch import STOPPED_STATUS
from launcher.telemetry.growth_words import death_clause
from launcher.telemetry.map_census import FIXES as MAP_FIXES
from launcher.telemetry.series import SERIES
from launcher.telemetry.timeline import trends
from launcher.threadpools import MEMORY_FIX

PEAK_FIX = ("keep what each cycle needs from growing (its batch, chunk, cache or pool is "
            "made larger each cycle, and freed at its end)")
CENSUS_FIXES = {**FILE_FIXES, **MAP_FIXES}  # the kind a census found growing -> its fix
FIXES = {"files": "close what each cycle opens (files, sockets, pipes, DataLoader workers' "
                  "handles), or run each cycle in a fresh process",
         "processes": "wait for each child it starts (Popen.wait() or communicate(), "
                      "os.waitpid, `with subprocess.Popen(...)`) so none stays a zombie, and "
                      "close and join each pool it makes (pool.close(); pool.join(), or `with "
                      "Pool() as pool`)",
         "maps": "free each cycle's mappings (memory-mapped files, allocator arenas, thread "
                 "stacks with their threads), or run each cycle in a fresh process"}

# the supervisor's reason -> the series that ran into it, and the limit in words where the
# series' own limit is not the one that was hit
DIED_OF = {"pids": ("threads", None),
           "nproc": ("threads", "RLIMIT_NPROC"), "threads-max": ("threads", "kernel.threads-max"),
           "oom": ("memory_bytes", None), "as": ("vm_size_bytes", None),
           "data": ("vm_data_bytes", None), "maps": ("maps", None), "files": ("files", None)}
NEAR = 0.95  # of a limit: a series this close to it at the end is taken to have met it


def words_reason(words: dict[str, str], cycles: list[Any], found: list[Trend],
                 peaks: dict[str, float] | None = None,
                 unsampled_s: float = 0.0) -> list[str | None]:
    """Limits that no cgroup counter shows, from the workload's words and the last cycle:
    `Too many open files` with the files near RLIMIT_NOFILE (or, without words, held at
    it), an allocation that failed with the memory maps at vm.max_map_count (sampled near
    it, or growing to it in that cycle, or in the `unsampled_s` between the last sample and
    the workload's end at its rate)."""
    last = cycles[-1] if cycles else None
    if last is None:
        return []
    # the limits last read: a run's last window may hold no sample of its own (it died
    # before the next one, on a busy host)
    limits = next((c.limits for c in reversed(cycles) if c.limits), {})

    def near(key: str) -> bool:
        limit = limits.get(key)
        t = next((t for t in found if t.series == key and t.grows), None)
        peak = max(last.peak.get(key, 0), (peaks or {}).get(key, 0))  # the run's own last
        gained = t.per_minute / 60 * unsampled_s if t is not None and t.per_minute else 0.0
        return bool(limit) and (peak + gained >= NEAR * limit or (
            t is not None and t.reached is not None and t.reached <= last.n + 1))

    def at(key: str) -> bool:  # held at the limit itself: the kernel refused the next one
        limit = limits.get(key)
        return bool(limit) and max(last.peak.get(key, 0), (peaks or {}).get(key, 0)) >= limit

    return ["files" if near("files") and ("files" in words or at("files")) else None,
            "maps" if "memory" in words and near("maps") else None]


def growth_record(rows: list[dict[str, Any]], watched: dict[str, Any], ended: dict[str, Any],
                  *, status: int, ended_at: float | None = None) -> dict[str, Any]:
    """{"status": the run's exit status, "diagnosis": a new one or None, and the growth
    record: unit, cycles, trends, what was said, the stop, the workload's failure words}."""
    end = rows[-1]["t"] if rows else None
    dropped = watched.get("dropped") or {}
    if dropped:  # a counter that stopped counting marks nothing: time windows, as watched
        rows = [r if not (r.get("cycle") and r["cycle"].get("unit") in dropped)
                else {k: v for k, v in r.items() if k != "cycle"} for r in rows]
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
    words = watched.get("failure_text") or {}
    survived = reason in ("ok", "exit-pids")  # a limit met and survived (caught, retried)
    if reason == "exit-pids":
        reason = "pids"
    if reason in ("exit", "ok"):  # the workload's own words for a limit no counter shows,
        # or a count held at its rlimit, whatever its exit status
        peaks = {k: max((r[k] for r in rows if isinstance(r.get(k), (int, float))), default=0)
                 for k in ("files", "maps")}
        unsampled = max(0.0, ended_at - end) if ended_at is not None and end is not None \
            else 0.0  # the last sample to the workload's end (the supervisor's clock)
        reason = next((r for r in words_reason(words, cycles, found, peaks, unsampled) if r),
                      reason)
    if reason in DIED_OF:
        clause = grew_to_death(found, cycles, reason, ended, end=end,
                               said=watched.get("said") or [])
        if clause and survived:  # it lived on: the limit it met, and the growth that led there
            clause = (f"the workload exited with status {status}, but "
                      f"{clause[0].lower()}{clause[1:]}")
        record["diagnosis"] = clause
    if record["diagnosis"] is None and reason in ("exit", "ok", "maps", "files") and words:
        clause = likeliest(watched["failure_text"], ended.get("limits_at_start") or {})
        if clause:
            record["likeliest"] = clause
            record["diagnosis"] = f"{str(ended.get('diagnosis', '')).rstrip('.')}; {clause}."
    return record


def grew_to_death(found: list[Trend], cycles: list[Any], reason: str,
                  ended: dict[str, Any], *, end: float | None = None,
                  said: Sequence[dict[str, Any]] = ()) -> str | None:
    key, limit_word = DIED_OF[reason]
    if key == "memory_bytes" and not any(t.series == key for t in found):
        key = "rss_bytes"  # no memory cgroup of its own: the RSS
    keys = (key, "processes") if key == "threads" else (key,)  # threads grown as processes
    t = next((t for k in keys for t in found if t.series == k and t.grows), None)
    died = died_in(cycles)
    if t is None:  # the growth said while it ran, where the run's end is flat: held at the
        # limit (memory near its limit thrashes in reclaim for minutes before the kill)
        t = next((Trend.from_json(s["trend"]) for s in reversed(said)
                  if s["trend"]["series"] in keys), None)
        if t is None:
            return None
        if not found or found[0].unit != t.unit:  # cycles given up for time since
            died = None
    key = t.series
    own = next((said[f"{key}_fix"] for c in cycles[-1:] for said in c.loaded.values()
                if said.get(f"{key}_fix")), None)  # a loaded framework's own (torch's files)
    kind = next((c.who[f"{key}_kind"] for c in reversed(cycles) if c.who.get(f"{key}_kind")),
                None)  # what the census found growing: a log file, sockets, event loops
    # a framework's fix for its threads (t.fix) is no fix for memory or files
    fix = (PEAK_FIX if t.of == "peak" else own or CENSUS_FIXES.get(kind or "") or FIXES.get(key)
           or (t.fix if key == "threads" else None)
           or (MEMORY_FIX if SERIES[key].in_bytes else fix_for(t.pool)))
    return death_clause(t, died, fix, limit_word=limit_word, ended_s=end) + "."
