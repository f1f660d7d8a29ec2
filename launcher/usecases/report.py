"""`launcher report RUN_DIR`: a run's summary, from summary.json or, where the launcher died
first, from the telemetry it left; telemetry.png drawn when asked."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.errors import LauncherError
from launcher.flags import Flag, flag
from launcher.telemetry.sampler import SERIES_WORDS

__all__ = ["SERIES_WORDS", "ReportRequest", "ReportResult", "report", "why_no_plot"]

PLOT_EXTRA = "pip install 'launcher[plot]'"


@dataclass(frozen=True, kw_only=True)
class ReportRequest:
    run_dir: Path = flag(Flag((), kind="path", metavar="RUN_DIR"), dataclasses.MISSING)
    plot: bool = flag(Flag(("--plot",), "Draw telemetry.png now if it is not there.",
                           kind="bool"), False)
    profile: str | None = flag(Flag(
        ("--profile", "-p"), "Replay the run against this profile's limits (pids, memory, "
        "nofile): would it have died there, in which cycle, of what?"))


@dataclass(frozen=True, kw_only=True)
class ReportResult:
    summary: dict[str, Any]
    png: Path | None  # telemetry.png, when it is there
    why_no_plot: str | None  # why there is none and cannot be one
    plot_refused: bool = False  # --plot asked for one that cannot be drawn
    what_if: dict[str, Any] | None = None  # {"profile", "verdicts", "first"} with --profile


def why_no_plot(samples: int) -> str | None:
    """Why telemetry.png cannot be drawn for a run with `samples` samples; None if it can."""
    import importlib.util

    if samples < 2:
        return (f"the run has {samples} sample{'' if samples == 1 else 's'} and a plot needs "
                f"2 (a shorter --interval samples more)")
    if importlib.util.find_spec("matplotlib") is None:
        return f"matplotlib is not installed ({PLOT_EXTRA})"
    return None


def report(req: ReportRequest) -> ReportResult:
    run_dir = req.run_dir
    path = run_dir / "summary.json"
    try:
        summary = json.loads(path.read_text())
    except FileNotFoundError:
        summary = _unfinished(run_dir)
    except ValueError as exc:
        raise LauncherError(f"{path}: not valid JSON: {exc}") from None
    if "gpus" not in summary:
        summary["gpus"] = _gpus_from_telemetry(run_dir)
    what_if = _what_if(run_dir, req.profile) if req.profile else None
    png = run_dir / "telemetry.png"
    why = None if png.exists() else why_no_plot(summary["samples"])
    if req.plot and not png.exists() and why is None:
        from launcher.telemetry.plot import draw

        draw(run_dir)
    return ReportResult(summary=summary, png=png if png.exists() else None, why_no_plot=why,
                        plot_refused=bool(req.plot and why), what_if=what_if)


def _what_if(run_dir: Path, profile: str) -> dict[str, Any]:
    from dataclasses import asdict

    from launcher.usecases.what_if import first, read_rows, replay

    name, verdicts = replay(read_rows(run_dir), profile)
    dies = first(verdicts)
    return {"profile": name, "verdicts": [asdict(v) for v in verdicts],
            "first": asdict(dies) if dies else None}


def _unfinished(run_dir: Path) -> dict[str, Any]:
    """A run whose launcher ended before it could write summary.json (kill -9): its peaks
    from the telemetry it left."""
    from launcher.telemetry.summary import read_series, summarize

    series = run_dir / "telemetry.jsonl"
    if not series.is_file():
        raise LauncherError(f"{run_dir / 'summary.json'}: no such file; is {run_dir} a run "
                            f"directory (runs/RUN-ID)?")
    return summarize(read_series(series), {
        "run_id": run_dir.name, "profile": "?", "framework": "?", "runtime": "?",
        "command": ["?"], "exit_status": "?", "engine": {},
        "diagnosis": "launcher ended before the run did (killed?): no summary.json, so these "
                     "are the peaks of the telemetry it left"})


def _gpus_from_telemetry(run_dir: Path) -> list[dict[str, Any]]:
    """The per-GPU rows of a summary.json written before it had them: the summarizer's own,
    from the samples in telemetry.jsonl (unnamed: the run's host facts are not kept)."""
    from launcher.telemetry.summary import gpu_peaks, read_series

    series = run_dir / "telemetry.jsonl"
    if not series.is_file():
        return []
    try:
        return gpu_peaks(read_series(series), {})
    except (ValueError, KeyError, TypeError):
        return []  # a series too damaged to summarise: the report goes on without GPU rows
