"""A run started and watched: the lines before it, the run folder, the image pulled where
--image names one that is not here, the supervised run once, and the line after it."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from launcher.caps.resolve import Resolved
from launcher.errors import LauncherError
from launcher.runtime.engine import (
    BuildEvent,
    Engine,
    ImageNotFound,
    OutputClosed,
    passes_through,
)
from launcher.runtime.spec import RunSpec
from launcher.usecases.events import Teller
from launcher.usecases.run_checks import Override
from launcher.usecases.run_request import OnOutput, RunRequest


def start(req: RunRequest, *, engine: Engine, spec: RunSpec, r: Resolved, run_dir: Path,
           command: list[str], tell: Teller, on_output: OnOutput | None,
           overridden: Override | None = None,
           framework_words: str = "") -> tuple[int, int | None]:
    """The run itself: leftovers reported beside it, the caps said, the run folder made, the
    image pulled when --image names one that is not here. `framework_words` end the start
    line (where a framework read from the script was found). The exit status, and the signal
    the workload died of."""
    from launcher.supervise.report import report, thread_summary

    growth = _growth_options(req, r)  # a bad pattern: an error before anything starts
    leftovers = threading.Thread(target=_report_leftovers, args=(engine, tell), daemon=True)
    leftovers.start()
    # inherited values replaced and warnings: always
    report(r.caps, True, tell.say, overridden_by=overridden and overridden.by)
    tell.note(f"thread values from: {thread_summary(r.caps)}; pids budget "
              f"{_or_unlimited(r.caps.budget.available)} ({r.caps.budget.binding})")
    _report_lowered_ulimits(r, tell)
    fresh = not run_dir.exists()
    sink = _sink(on_output)

    def supervised() -> tuple[int, int | None]:
        _make_run_dir(run_dir)
        return _supervised_run(engine=engine, spec=spec, r=r, run_dir=run_dir,
                               command=command, interval=req.interval, fresh=fresh,
                               sink=sink, tell=tell, growth=growth, overridden=overridden,
                               framework_words=framework_words)

    try:
        ended = supervised()
    except ImageNotFound:  # an image named with --image that is not here: pulled, then run
        if not req.image:
            raise
        _pull(engine, req.image, tell)
        ended = supervised()
    leftovers.join(timeout=2)
    return ended


def _sink(on_output: OnOutput | None) -> OnOutput:
    """The workload's output to `on_output`; a reader gone (BrokenPipeError) stops the run."""

    def sink(stream: str, data: bytes) -> None:
        if on_output is None:
            return
        try:
            on_output(stream, data)
        except BrokenPipeError:
            raise OutputClosed(stream) from None

    sink.passthrough = passes_through(on_output) if on_output else False  # type: ignore[attr-defined]
    return sink


def _make_run_dir(run_dir: Path) -> None:
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LauncherError(f"cannot create the run folder {run_dir}: {exc.strerror}; set "
                            f"LAUNCHER_RUNS_DIR to a folder you can write") from None


def _pull(engine: Engine, image: str, tell: Teller) -> None:
    """An image named with --image that is not here: pulled, its progress a line a second
    (a failed pull: one line, the error)."""

    def show(event: BuildEvent) -> None:
        tell.say(event.text)

    engine.pull(image, show)


def _report_lowered_ulimits(r: Resolved, tell: Teller) -> None:
    """A ulimit lowered to this host's hard limit: a warning when the user's own profile asked
    for more, a note (-v) when it is a shipped default (nofile 1048576 on an ordinary host).
    A memory limit lowered to this host's memory: always a warning (a profile written for a
    bigger machine)."""
    memory = r.caps.limits.get("memory")
    if memory is not None and memory.lowered:
        tell.warn(f"memory limit: {memory.source}")
    for name, u in r.caps.ulimits.items():
        if u.lowered:
            line = f"ulimit {name}: {u.source}"
            if r.profile.from_shipped(f"limits.{name}"):
                tell.note(line)
            else:
                tell.warn(line)


def _report_leftovers(engine: Engine, tell: Teller) -> None:
    """Beside the run (a thread): what killed runs left behind, in one line; what holds
    nothing (a container never started, an empty run cgroup) is removed."""
    from launcher.runtime.engines import tidy_leftovers

    try:
        _, left = tidy_leftovers(engine)
    except Exception:  # noqa: BLE001 - a report must never disturb the run
        return
    if left:
        what = ", ".join(left[:3]) + (f" and {len(left) - 3} more" if len(left) > 3 else "")
        tell.warn(f"earlier launcher runs that were killed left {what} behind; "
                  f"`launcher doctor --clean` removes them")


def _growth_options(req: RunRequest, r: Resolved) -> Any:
    """What marks a cycle (--cycle, else the profile's growth.cycle, else the defaults), the
    window that stands in where nothing does, and whether to stop before a limit."""
    from launcher.telemetry.growth_watch import GrowthOptions

    try:
        return GrowthOptions.of(r.profile, cycle=req.cycle, stop=req.stop_before_limit)
    except ValueError as exc:
        raise LauncherError(str(exc)) from None


def _supervised_run(*, engine: Engine, spec: RunSpec, r: Resolved, run_dir: Path,
                    command: list[str], interval: float, fresh: bool, sink: OnOutput,
                    tell: Teller, growth: Any = None, overridden: Override | None = None,
                    framework_words: str = "") -> tuple[int, int | None]:
    from launcher.runtime.session import plot_in_background, supervised_run
    from launcher.supervise.report import preflight
    from launcher.usecases.report import why_no_plot

    after = framework_words + (f"; the plan refused it, run anyway ({overridden.by})"
                               if overridden else "")
    end = supervised_run(
        engine, spec, r, run_dir, command=command, interval=interval, fresh=fresh,
        on_output=sink, say=tell.say, growth=growth,
        on_start=lambda info: tell.say(preflight(r.caps, engine.name,
                                                 info.enforcement.sentence()) + after),
        override=overridden and (overridden.words(), overridden.to_json()))
    if end.summary is None:
        return end.status, None  # nothing ran (the supervisor said why): no run folder
    why = why_no_plot(end.summary["samples"])
    if why is None:
        plot_in_background(run_dir)
    tell.say(f"run {run_dir.name}: telemetry and summary in {run_dir}/"
             + (f"; no plot: {why}" if why else ", telemetry.png drawn in the background")
             + f" (`launcher report {run_dir}`)")
    if not end.started:
        tell.say("the command was not found where it ran (for a container: in the image)")
    return end.status, end.signal


def _or_unlimited(n: int | None) -> str:
    return "unlimited" if n is None else str(n)

