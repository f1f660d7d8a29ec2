"""`launcher report`'s growth section, as lines the CLI prints: a table per cycle (floor and
peak of each series that moved), each trend with its projection, the thread census of the
last cycle, what was said while the run went, and a what-if against another profile's limits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SHOWN = ("threads", "memory_bytes", "rss_bytes", "vm_size_bytes", "vm_data_bytes", "maps",
         "files")
# whose figure each column is: a tree's sum, or its largest process's (each process has its own
# rlimits), or the run cgroup's
WHOSE = {"rss_bytes": "RSS, all processes", "vm_size_bytes": "VmSize, largest process",
         "vm_data_bytes": "VmData, largest process", "maps": "maps, largest process",
         "files": "open files, largest process", "memory_bytes": "memory, the cgroup's"}
MAX_ROWS = 12  # cycles in the table: the first and last ones, the middle elided


def _cell(key: str, lo: float | None, hi: float | None) -> str:
    from launcher.telemetry.growth_words import show

    if lo is None or hi is None:
        return "-"
    low, high = show(key, lo), show(key, hi)
    return low if low == high else f"{low}-{high}"


def cycle_rows(growth: dict[str, Any]) -> list[tuple[str, ...]]:
    from launcher.telemetry.series import SERIES

    cycles = growth.get("cycles") or []
    trending = {t["series"] for t in growth.get("trends", []) if t.get("grows")}
    keys = [k for k in SHOWN if any(k in c["floor"] for c in cycles) and (
        k in trending or k in ("threads", "rss_bytes"))]
    unit = growth.get("unit") or "cycle"
    kernel = any(c.get("kernel_peak") for c in cycles)
    rows = [(unit, "seconds", *(f"{WHOSE.get(k, SERIES[k].word)} (floor-peak)" for k in keys),
             *(("memory peak (kernel)",) if kernel else ()))]
    picked = cycles if len(cycles) <= MAX_ROWS + 2 else (
        cycles[:MAX_ROWS // 2] + [None] + cycles[-MAX_ROWS // 2:])
    for c in picked:
        if c is None:
            rows.append(("...", "", *("" for _ in keys), *(("",) if kernel else ())))
            continue
        secs = f"{c['t1'] - c['t0']:.1f}" if c.get("t1") is not None else "(last)"
        rows.append((str(c["n"]), secs, *(_cell(k, c["floor"].get(k), c["peak"].get(k))
                                          for k in keys),
                     *((_cell("memory_bytes", c.get("kernel_peak"), c.get("kernel_peak")),)
                       if kernel else ())))
    return rows


def census_words(census: dict[str, dict[str, int]] | None) -> str:
    if not census:
        return "-"
    pools = sorted(census.items(), key=lambda kv: -sum(kv[1].values()))
    return ", ".join(f"{pool} {sum(names.values())}" for pool, names in pools)


def growth_lines(growth: dict[str, Any] | None,
                 table: Callable[[list[tuple[str, ...]]], str]) -> list[str]:
    """The section's lines; `table` lays out rows (the CLI's)."""
    from launcher.telemetry.growth import Trend
    from launcher.telemetry.growth_words import live_line, step
    from launcher.telemetry.series import SERIES

    if not growth or not growth.get("unit"):
        return []
    unit = growth["unit"]
    cycles = growth.get("cycles") or []
    count = growth.get("cycles_count") or len(cycles)
    # by their numbers: lines that came in one read (a busy host) share one sample
    marked = cycles[-1]["n"] - cycles[0]["n"] + 1 if cycles else count
    apart = (f"; {count} sampled apart, the others' lines came with the one before"
             if marked > count else "")
    lines = [f"growth per {unit} ({max(marked, count)} {unit}s, marked by the workload's "
             f"output{apart})"
             if unit != "window" else
             f"growth per window ({count} windows{_width(cycles)}: no line of the workload's "
             f"marked a cycle, so windows of time stand in)"]
    lines.append(table(cycle_rows(growth)))
    grew = [t for t in growth.get("trends", []) if t.get("grows")]
    for t in grew:
        trend = Trend.from_json(t)
        if t.get("reached") is not None:
            lines.append(f"  trend: {live_line(trend, ended=True)}")
        else:
            lines.append(f"  trend: {SERIES[t['series']].word} {step(trend)}, no limit within "
                         f"reach")
    if not grew:
        lines.append(f"  trend: none (no series' floor rose steadily enough {unit} after "
                     f"{unit}, or too few {unit}s to be sure)")
    census = next((c["census"] for c in reversed(cycles) if c.get("census")), None)
    if census:
        lines.append(f"  threads at the start of {unit} {cycles[-1]['n']}: "
                     f"{census_words(census)}")
    for said in growth.get("said") or []:
        lines.append(f"  said at {said['t']:.1f} s ({unit} {said['cycle']}): {said['line']}")
    if growth.get("stopped"):
        lines.append(f"  stopped: {growth['stopped']['why']}")
    if growth.get("likeliest"):
        lines.append(f"  thread failure: {growth['likeliest']}")
    return lines


def what_if_lines(what_if: dict[str, Any] | None) -> list[str]:
    if not what_if:
        return []
    lines = [f"what if it ran under profile {what_if['profile']}:"]
    for v in what_if["verdicts"]:
        lines.append(f"  {v['sentence']} [{v['key']}]")
    dies = what_if.get("first")
    if dies is None:
        lines.append("  verdict: it would have run to the end")
    else:
        lines.append(f"  verdict: it would die of {dies['sentence'].split(':')[0]}")
    return lines


def _width(cycles: list[dict[str, Any]]) -> str:
    """` of 2 s`: the windows' length, as recorded (a run's windows grow as it runs)."""
    if len(cycles) < 2 or cycles[0].get("t1") is None:
        return ""
    return f" of {cycles[0]['t1'] - cycles[0]['t0']:.3g} s"

