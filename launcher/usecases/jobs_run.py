"""`launcher jobs run`: the chunks not finished yet, run over a backend's slots
(launcher/jobs/run.py orchestrates); the summary and how the run ended."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from launcher.jobs.run import JobRun, run_job
from launcher.jobs.summary import lines as summary_lines
from launcher.usecases.events import OnEvent, Teller

__all__ = ["JobRun", "JobsRunResult", "run", "summary_lines"]


@dataclass(frozen=True, kw_only=True)
class JobsRunResult:
    summary: dict[str, Any]
    finished: bool  # the queue ran to its end (not stopped by Ctrl-C)

    @property
    def status(self) -> int:
        """130 when stopped, 1 when a chunk failed, else 0."""
        if not self.finished:
            return 130
        return 1 if self.summary["counts"]["failed"] else 0


def run(req: JobRun, *, progress: Callable[[int, int], Any],
        on_event: OnEvent | None = None) -> JobsRunResult:
    """`progress` makes what shows progress from (total items, items done before)."""
    summary, finished = run_job(req, progress, Teller(on_event).say)
    return JobsRunResult(summary=summary, finished=finished)
