"""`launcher report RUN_DIR`: a run's summary."""

from __future__ import annotations

import dataclasses
from typing import Any

from launcher.cli.declare import JSON, command
from launcher.cli.output import print_json, table
from launcher.errors import LauncherError
from launcher.units import format_size
from launcher.usecases.report import ReportRequest


def report(req: ReportRequest, *, as_json: bool) -> int:
    from launcher.usecases.report import SERIES_WORDS
    from launcher.usecases.report import report as read_report

    profile = req.profile
    got = read_report(dataclasses.replace(req, plot=req.plot and not as_json))
    summary = got.summary
    if as_json:
        print_json({**summary, "what_if": got.what_if} if profile else summary)
        return 0
    import shlex

    print(f"run {summary['run_id']}: {shlex.join(summary['command'])}")
    took = (summary.get("ended") or 0) - (summary.get("started") or 0)
    print(f"profile {summary['profile']} ({summary['framework']}), runtime "
          f"{summary['runtime']}, {took:.1f}s, {summary['samples']} telemetry sample"
          f"{'' if summary['samples'] == 1 else 's'}")
    rows = [("series", "peak", "limit", "headroom", "use")]
    for key, v in summary["peaks"].items():
        fmt = _signed_size if key == "rss_bytes" else str
        rows.append((SERIES_WORDS.get(key, key), "-" if v["peak"] is None else fmt(v["peak"]),
                     "-" if not v["limit"] else fmt(v["limit"]),
                     "-" if v["headroom"] is None else fmt(v["headroom"]),
                     "-" if v["percent"] is None else f"{v['percent']}%"))
    kernel = summary.get("memory_peak_kernel")  # what the memory limit is checked against
    if kernel:
        limit = (summary["peaks"].get("rss_bytes") or {}).get("limit")
        rows.append(("memory (kernel)", _signed_size(kernel), _signed_size(limit) if limit
                     else "-", _signed_size(limit - kernel) if limit else "-",
                     f"{kernel * 100 / limit:.1f}%" if limit else "-"))
    print(table(rows))
    if summary.get("gpus"):
        print(table(gpu_rows(summary["gpus"])))
    threads = summary["peaks"].get("threads", {})
    if threads.get("estimate") is not None:
        print(threads_line(threads, summary["peaks"].get("pids_current", {})))
    notes = summary.get("engine") or {}
    for what in ("enforced", "advisory"):
        if notes.get(what):
            print(f"{what}: " + ", ".join(f"{k} {v}" for k, v in notes[what].items()))
    from launcher.usecases.growth_report import growth_lines, what_if_lines

    for line in growth_lines(summary.get("growth"), table):
        print(line)
    print(f"exit status {summary['exit_status']}: {summary['diagnosis']}")
    for line in what_if_lines(got.what_if):
        print(line)
    if got.plot_refused:
        raise LauncherError(f"no telemetry.png: {got.why_no_plot}")
    why = got.why_no_plot
    print(f"plot: {got.png}" if got.png else f"plot: none ({why})" if why else
          f"plot: none yet (`launcher report {req.run_dir} --plot`)")
    return 0


def _signed_size(n: int) -> str:
    """A size in units, a negative one too (a headroom past its limit: -13.3MiB)."""
    return f"-{format_size(-n)}" if n < 0 else format_size(n)


def threads_line(threads: dict[str, Any], pids: dict[str, Any]) -> str:
    """The peak against the plan's estimate, saying which figure it is: the kernel's count
    (the run cgroup's pids.peak: every task, however short-lived) where a pids cgroup counted
    the run, else the samples' (a pool shorter than a sample falls between them)."""
    sampled, kernel, est = threads.get("peak"), pids.get("kernel_peak"), threads["estimate"]
    seen = [p for p in (sampled, kernel) if p is not None]
    verdict = "within" if seen and max(seen) <= est else "ABOVE"
    shown = "-" if sampled is None else sampled
    figure = (f"peak {kernel} counted by the kernel (the run cgroup's pids.peak; the samples "
              f"saw {shown})" if kernel is not None else
              f"peak {shown} sampled (no pids cgroup counted the run: a pool shorter than a "
              f"sample is missed)")
    return f"threads: {figure}, {est} estimated by the plan ({verdict} the estimate)"


def gpu_rows(gpus: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    """One row per GPU: utilisation (peak, mean) and peak memory used against the total."""
    rows = [("gpu", "util peak", "util mean", "memory peak", "total", "use", "samples")]
    for g in gpus:
        name = f"GPU {g['gpu']} ({g.get('name') or g['vendor']})"
        rows.append((name, f"{g['util_peak_percent']}%", f"{g['util_mean_percent']}%",
                     format_size(g["memory_peak_bytes"]), format_size(g["memory_total_bytes"]),
                     "-" if g["memory_percent"] is None else f"{g['memory_percent']}%",
                     str(g["samples"])))
    return rows


COMMAND = command("report", ReportRequest, report, own=(JSON,), help="""Print a run's summary:
peaks against limits, estimated against observed threads, headroom, growth per cycle with its
projection and thread census, exit status and diagnosis. With --profile, what the run would
have met under another profile's limits.""")
