"""`launcher run`: a capped workload (container or native process), streamed, watched by
telemetry, its exit status passed on. The request is the command line's values; the workload's
output goes to `on_output`, every other line to `on_event`. What `launcher run` imports at its
start stays small: the rest is imported where it is used."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launcher.caps.model import Why
from launcher.caps.resolve import Resolved
from launcher.errors import CommandNotFound, LauncherError, Refused
from launcher.names import NAME, NAME_RULE
from launcher.render.images import default_tag
from launcher.runtime.engine import BuildEvent, Engine, ImageNotFound, OutputClosed
from launcher.runtime.engines import choose_engine
from launcher.runtime.owner import OWNER_LABEL, RUN_LABEL, owner
from launcher.runtime.spec import Mount, RunSpec, build_spec
from launcher.units import format_size, mib_up
from launcher.usecases.events import OnEvent, Teller
from launcher.workloads.catalog import Workload

if TYPE_CHECKING:  # argparse comes with a workload's parser, only when one is named
    import argparse

__all__ = ["DryRun", "RunRequest", "RunResult", "RunSpec", "run", "runs_dir"]

OnOutput = Callable[[str, bytes], None]  # stream ("stdout"/"stderr"), bytes; may raise
# BrokenPipeError when the reader is gone


def runs_dir() -> Path:
    return Path(os.environ.get("LAUNCHER_RUNS_DIR") or "runs")


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    command: tuple[str, ...]  # a workload and its arguments, or a command
    profile: str = "auto"
    framework: str | None = None
    processes: int | None = None
    runtime: str = "auto"
    image: str | None = None
    gpus: str | None = None
    env: dict[str, str] = field(default_factory=dict)  # --env, parsed
    volumes: tuple[str, ...] = ()
    workdir: str | None = None
    user: str | None = None
    mount_cwd: bool = True
    name: str | None = None
    resume: str | None = None
    dry_run: bool = False
    interval: float = 1.0
    host_root: Path | None = None
    write_profile: Path | None = None
    fit: bool = False  # shrink the pools to fit the pids budget instead of refusing
    require_limits: bool = False  # refuse rather than run with a limit the kernel cannot keep
    override: bool = False  # run it even where the plan refuses it (an informed override)
    cycle: str | None = None  # what marks a cycle in the output (a regular expression)
    stop_before_limit: bool = False  # stop at the start of the cycle growth takes past a limit


@dataclass(frozen=True, kw_only=True)
class DryRun:
    """What a real run would start, and what it could not enforce here."""

    runtime: str
    spec: RunSpec
    request: Any  # the engine's own request (docker's container config, a process plan)
    threads: str  # the estimate in words, for the whole run
    estimate: dict[str, Any]
    verdict: dict[str, Any]
    advisory: dict[str, str]  # cap -> why a real run could not enforce it here
    refused_by: str | None  # who makes a real run refuse for it (None: a warning)


@dataclass(frozen=True, kw_only=True)
class RunResult:
    status: int  # the workload's exit status (or its parser's, for its --help)
    help: str | None = None  # a user workload's --help: printed, nothing run
    dry_run: DryRun | None = None
    run_dir: Path | None = None


def run(req: RunRequest, *, on_event: OnEvent | None = None,
        on_output: OnOutput | None = None) -> RunResult:
    from launcher.caps.load import load_and_resolve
    from launcher.profiles import load_profile
    from launcher.usecases.fit import fit_or_advise
    from launcher.workloads.catalog import catalog

    tell = Teller(on_event)
    if not req.command:
        raise LauncherError("nothing to run: give a workload (see `launcher workloads`) or a "
                            "command after --, e.g. `launcher run -- python3 -c 'import numpy'`")
    workloads = catalog()
    workload = workloads.get(req.command[0])
    args = list(req.command[1:])
    if workload is None:
        _check_not_a_typo(req.command[0], list(workloads))
    elif workload.module is None and args in (["--help"], ["-h"]):
        return RunResult(status=0, help=_user_workload_help(workload))  # it has no flags
    elif (parser := workload.parser()) is not None:
        stop = _parse_workload_args(parser, args)
        if stop is not None:  # its help, or its usage error: before any run folder exists
            return RunResult(status=stop)
    prof = load_profile(req.profile)
    _check_write_profile(req, workload, prof)
    fw = (req.framework or (workload.framework if workload else None)
          or prof.get("framework", "none"))
    image = req.image or default_tag(prof.name, fw)
    if req.name is not None and not NAME.match(req.name):
        raise LauncherError(f"--name must be {NAME_RULE} (got {req.name!r})")
    # an image named with --image is pulled when missing: auto takes the first engine that
    # answers; the default tag is a local build, never pulled
    engine, chose, lacked_image = choose_engine(req.runtime, image,
                                                check_image=req.image is None)
    command = workload.argv(args, engine.python) if workload else list(req.command)
    r = load_and_resolve(prof, host_root=req.host_root,
                         inherit_shell=engine.inherits_environment, framework=fw,
                         processes=req.processes, overrides=dict(req.env), gpus=req.gpus,
                         clamp=True, extra_threads=workload.extra_threads if workload else 0)
    plain = r  # before a refusal's advice to fit, which an override makes moot
    r, fitted = fit_or_advise(r, apply=req.fit)
    run_id = _run_id(req, workload.name if workload else command[0])
    run_dir = runs_dir() / run_id
    required_by = _required_by(req, r)
    spec = build_spec(r, command, image=image, name=req.name if req.dry_run else run_id,
                      mounts=_mounts(req), workdir=_workdir(req),
                      user=req.user or _caller(), required_by=required_by)
    spec.labels.update({RUN_LABEL: run_id, OWNER_LABEL: owner()})
    if workload is not None and workload.module:
        _workload_paths(spec, run_dir)
    if workload is None and engine.runs_host_processes:  # before any warning or start line
        _check_on_path(command[0], spec.env.get("PATH"), spec.workdir)
    overridden = None
    if not req.dry_run:  # a refusal before any warning: nothing else matters then
        overridden = _check_verdict(r, plan_command(req, workload), _override_by(req, r))
        if overridden is not None and fitted is None:
            r = plain
            overridden = dataclasses.replace(overridden,
                                             reasons=tuple(plain.caps.verdict.reasons))
    if chose and req.image and engine.runs_host_processes:  # after every argument was checked
        tell.warn(f"--image {req.image} is not used: {chose}{_why_no_container()}")
    elif chose and lacked_image:  # a container engine answers: its missing image is news
        tell.warn(chose)
    elif chose:
        tell.note(chose)
    if fitted:
        tell.say(fitted)
    if r.caps.gpu.by_layout:  # a budget that holds only where each sees its own
        n = r.caps.gpu.count
        tell.warn(f"each of the {r.caps.processes} processes is budgeted for 1 of the {n} "
                  f"GPUs (the profile runs a process per GPU); in one run every process sees "
                  f"all {n}: give each its own (CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES), or "
                  f"run it as `launcher render` or `launcher jobs` do, one GPU each")
    if req.dry_run:
        if r.selection.shortfall:
            tell.warn(f"{r.selection.shortfall} (a real run refuses)")
        advisory = engine.preview(spec).advisory  # what a real run could not enforce here
        return RunResult(status=0, dry_run=DryRun(
            runtime=engine.name, spec=spec, request=engine.describe(spec),
            threads=r.caps.estimate.in_all(), estimate=r.caps.estimate.to_json(),
            verdict=r.caps.verdict.to_json(), advisory=advisory,
            refused_by=required_by if advisory else None))
    # after the checks that cost nothing: no one installs a framework to be refused then
    if workload is not None and workload.module and engine.inherits_environment:
        _check_framework(workload.name, workload.framework)
    _check_limits(engine, spec, tell)
    status = _start(req, engine=engine, spec=spec, r=r, run_dir=run_dir, command=command,
                    tell=tell, on_output=on_output, overridden=overridden)
    if req.write_profile is not None:
        _write_any_profile(req, status, workload, r, run_dir, command, tell)
    return RunResult(status=status, run_dir=run_dir)


def _check_write_profile(req: RunRequest, workload: Workload | None, prof: Any) -> None:
    if req.write_profile is None:
        return
    if _is_stress(workload) and any(a == "--out" or a.startswith("--out=")
                                    for a in req.command[1:]):
        raise LauncherError("--write-profile reads the results from the run's folder: leave "
                            "out the workload's --out")
    from launcher.profiles.writer import check_target

    check_target(req.write_profile, prof, "--write-profile")


def _is_stress(workload: Workload | None) -> bool:
    """A stress run writes its own findings (recommended settings) beside what was measured."""
    return workload is not None and workload.module is not None and hasattr(
        workload.module_object(), "recommendation")


def plan_command(req: RunRequest, workload: Workload | None) -> str:
    """The `launcher plan` that shows this run's verdict: the same profile and options."""
    import shlex

    words = ["launcher", "plan", "--profile", req.profile]
    for flag, value in (("--framework", req.framework), ("--processes", req.processes),
                        ("--gpus", req.gpus), ("--workload", workload and workload.name),
                        ("--host-root", req.host_root)):
        if value is not None:
            words += [flag, str(value)]
    for name, value in req.env.items():
        words += ["--env", f"{name}={value}"]
    return shlex.join(words + ["--fit"] * req.fit)


def _check_verdict(r: Resolved, plan: str, override_by: str | None) -> Override | None:
    """A refused plan, every reason at once (a GPU shortfall's too); GPUs this host lacks.
    With an override (`override_by`), a refusal the estimate made is run all the same: what
    was overridden comes back. GPUs that are not there are never overridden."""
    short = r.selection.shortfall
    if r.caps.verdict.level != "refuse":
        if short:
            raise LauncherError(short)
        return None
    reasons = r.caps.verdict.reasons
    if short:  # its own words: how many this host has, and what to pass
        reasons = [x.text for x in r.caps.verdict.said if x.kind is not Why.GPU_SHORT]
        reasons.append(f"{short[0].upper()}{short[1:]}.")
    if override_by is None or short:
        fix = (f" ({override_by} adds no GPUs)" if override_by else "") if short else \
            " --override runs it anyway, where you know better"
        raise Refused("refused: " + " ".join(reasons) + f"{fix} (see `{plan}`)")
    return Override(by=override_by, level="refuse", reasons=tuple(reasons), plan=plan)


@dataclass(frozen=True)
class Override:
    """A refusal run anyway: who said so, and the plan's verdict and reasons."""

    by: str
    level: str
    reasons: tuple[str, ...]
    plan: str

    def words(self) -> str:
        said = " ".join(self.reasons).rstrip(".")
        return f"the plan refused this run ({said}), and {self.by} ran it anyway"

    def to_json(self) -> dict[str, Any]:
        return {"by": self.by, "verdict": self.level, "reasons": list(self.reasons),
                "plan": self.plan}


def _override_by(req: RunRequest, r: Resolved) -> str | None:
    if req.override:
        return "--override"
    if r.profile.get("limits.override"):
        return f"limits.override ({r.profile.where('limits.override')})"
    return None


def _start(req: RunRequest, *, engine: Engine, spec: RunSpec, r: Resolved, run_dir: Path,
           command: list[str], tell: Teller, on_output: OnOutput | None,
           overridden: Override | None = None) -> int:
    """The run itself: leftovers reported beside it, the caps said, the run folder made, the
    image pulled when --image names one that is not here."""
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

    def supervised() -> int:
        _make_run_dir(run_dir)
        return _supervised_run(engine=engine, spec=spec, r=r, run_dir=run_dir,
                               command=command, interval=req.interval, fresh=fresh,
                               sink=sink, tell=tell, growth=growth, overridden=overridden)

    try:
        status = supervised()
    except ImageNotFound:  # an image named with --image that is not here: pulled, then run
        if not req.image:
            raise
        _pull(engine, req.image, tell)
        status = supervised()
    leftovers.join(timeout=2)
    return status


def _sink(on_output: OnOutput | None) -> OnOutput:
    """The workload's output to `on_output`; a reader gone (BrokenPipeError) stops the run."""

    def sink(stream: str, data: bytes) -> None:
        if on_output is None:
            return
        try:
            on_output(stream, data)
        except BrokenPipeError:
            raise OutputClosed(stream) from None

    return sink


def _why_no_container() -> str:
    """Why the container engines `--runtime auto` passed over do not answer (a socket this
    user may not open is no stopped daemon)."""
    from launcher.runtime.engines import auto_order, get_engine

    reasons = []
    for name in auto_order():
        engine = get_engine(name)
        if not engine.runs_host_processes:
            try:
                engine.ping()
            except LauncherError as exc:
                reasons.append(str(exc))
    return f" ({'; '.join(reasons)})" if reasons else ""


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


def _parse_workload_args(parser: argparse.ArgumentParser, args: list[str]) -> int | None:
    """A built-in workload's own parser reads its arguments here first: None when they parse,
    else the exit status of its help (0) or of its usage error (2), which it printed."""
    try:
        parser.parse_args(args)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    return None


def _check_framework(workload: str, framework: str) -> None:
    """A built-in workload run natively needs its framework in this interpreter."""
    import importlib.util
    import sys

    from launcher.frameworks import get as get_framework

    fw = get_framework(framework)
    if fw.needed and importlib.util.find_spec(fw.module) is None:
        raise LauncherError(f"{workload} needs {fw.module}, which is not installed for "
                            f"{sys.executable}: pip install {fw.install!r} (or run it in an "
                            f"image that has it: --image IMG)")


def _write_any_profile(req: RunRequest, status: int, workload: Workload | None, r: Resolved,
                      run_dir: Path, command: list[str], tell: Teller) -> None:
    """A stress run's findings, or any run's measurements; only after a run that succeeded
    (a peak cut short by a limit is no peak to plan with)."""
    import shlex

    from launcher.usecases.measured_profile import write_measured_profile

    assert req.write_profile is not None
    if status != 0:
        tell.warn(f"--write-profile: {req.write_profile} not written: the run exited with "
                  f"status {status}, so its peaks are not the ones it needs; run it again "
                  f"under higher limits (or none) to measure them")
        return
    if _is_stress(workload):
        assert workload is not None
        _write_profile(req.write_profile, workload, r, run_dir, tell)
        return
    what = workload.name if workload else " ".join(shlex.join(command).split())[:60]
    tell.say(write_measured_profile(req.write_profile, r, run_dir,
                                    f"launcher run {what} --write-profile"))


def _write_profile(path: Path, workload: Workload, r: Resolved, run_dir: Path,
                   tell: Teller) -> None:
    """A profile extending the run's, with what the stress run found: its recommended
    settings, workers.memory from the measured peak, and the thread pools it ran with."""
    from launcher.profiles.writer import shown, write_profile

    try:
        found, notes = workload.module_object().recommendation(run_dir / workload.name)
    except (OSError, ValueError, KeyError) as exc:
        raise LauncherError(f"--write-profile: {exc}") from None
    summary = json.loads((run_dir / "summary.json").read_text())
    rss = (summary["peaks"].get("rss_bytes") or {}).get("peak")
    threads = summary["peaks"].get("threads") or {}
    t = r.caps.threads
    sections: dict[str, object] = {"framework": r.framework, "recommended": found,
                                   "threads": {"intra_op": t["intra_op"],
                                               "inter_op": t["inter_op"], "omp": t["omp"]}}
    if rss:
        memory = -(-rss * 5 // 4)
        sections["workers"] = {"memory": mib_up(memory)}
        notes.append(f"workers.memory: the run's peak RSS {format_size(rss)} + 25% = "
                     f"{mib_up(memory)}.")
    notes.append(f"threads: the pools this run had ({r.caps.estimate.source}); peak "
                 f"{threads.get('peak')} threads observed, {threads.get('estimate')} "
                 f"estimated, run {run_dir.name}.")
    by = f"launcher run {workload.name} --write-profile"
    write_profile(path, r.profile, by, sections, notes)
    tell.say(f"wrote {path}: `launcher plan --profile {shown(path)}`; a run under it uses "
             f"{', '.join(f'{k} {v}' for k, v in found.items())}")


def _user_workload_help(w: Workload) -> str:
    """A user workload's --help: what it runs, from where; its command's own --help is a
    command to paste."""
    import shlex

    command = shlex.join([*w.command, *w.args])
    framework = ["--framework", w.framework] if w.framework != "none" else []
    return (f"{w.name}: {w.description or '(no description)'}\n"
            f"  defined in {w.source}\n"
            f"  runs: {command} [ARGS...]  (framework {w.framework})\n"
            f"every word after the name is the command's; its own --help: "
            f"`{shlex.join(['launcher', 'run', *framework, '--', *w.command, *w.args, '--help'])}`")


def _check_on_path(word: str, path: str | None, cwd: str | None) -> None:
    """A command run on this host that is not there: one line and 127, before anything."""
    if "/" in word:
        path = os.path.join(cwd or os.getcwd(), word)
        found = os.path.isfile(path) and os.access(path, os.X_OK)
    else:
        found = shutil.which(word, path=path) is not None
    if not found:
        what = "no such executable file" if "/" in word else "neither a workload nor a command " \
                                                               "on PATH"
        raise CommandNotFound(f"cannot run {word!r}: {what} (`launcher workloads` lists the "
                              f"workloads; a command inside an image needs --image IMG)")


def _check_not_a_typo(word: str, names: list[str]) -> None:
    """A first word that is no workload, no command here, and close to a workload name."""
    import difflib

    if "/" in word or shutil.which(word):
        return
    close = difflib.get_close_matches(word, names, n=1, cutoff=0.75)
    if close:
        raise LauncherError(f"{word!r} is neither a workload nor a command on PATH; did you "
                            f"mean the workload {close[0]!r}? (`launcher workloads` lists them)")


def _run_id(req: RunRequest, what: str) -> str:
    if req.resume:
        if not (runs_dir() / req.resume).is_dir():
            raise LauncherError(f"--resume {req.resume}: no such run in {runs_dir()}/")
        return req.resume
    if req.name:
        return req.name
    slug = "".join(c if c.isalnum() or c in "-_" else "-" for c in Path(what).name)[:24]
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{slug or 'run'}-{os.urandom(2).hex()}"


def _caller() -> str:
    """Files the workload writes into mounted folders belong to the calling user."""
    return f"{os.getuid()}:{os.getgid()}"


def _mounts(req: RunRequest) -> list[Mount]:
    mounts = []
    cwd = os.getcwd()
    if req.mount_cwd and cwd != "/":
        mounts.append(Mount(cwd, cwd))
    for v in req.volumes:
        m = Mount.parse(v)
        src = os.path.abspath(os.path.expanduser(m.source))
        if not os.path.exists(src):
            raise LauncherError(f"--volume {v}: no such file or folder {src!r}")
        if not m.target.startswith("/"):
            raise LauncherError(f"--volume {v}: the target must be an absolute path")
        mounts.append(Mount(src, m.target, m.read_only))
    return mounts


def _workdir(req: RunRequest) -> str | None:
    if req.workdir:
        if not req.workdir.startswith("/"):
            raise LauncherError(f"--workdir must be an absolute path (got {req.workdir!r})")
        return req.workdir
    cwd = os.getcwd()
    return cwd if req.mount_cwd and cwd != "/" else None


def _workload_paths(spec: RunSpec, run_dir: Path) -> None:
    """Built-in workloads import launcher and write into the run folder: the runs folder is
    mounted at its own path, so paths read the same inside and out."""
    runs = str(runs_dir().resolve())
    spec.imports_launcher = True
    if not any(m.source == runs for m in spec.mounts):
        spec.mounts.append(Mount(runs, runs))
    spec.env["LAUNCHER_RUNS_DIR"] = runs
    spec.env["LAUNCHER_RUN_DIR"] = str(run_dir.resolve())


def _growth_options(req: RunRequest, r: Resolved) -> Any:
    """What marks a cycle (--cycle, else the profile's growth.cycle, else the defaults), the
    window that stands in where nothing does, and whether to stop before a limit."""
    from launcher.telemetry.growth_watch import GrowthOptions

    try:
        return GrowthOptions.of(r.profile, cycle=req.cycle, stop=req.stop_before_limit)
    except ValueError as exc:
        raise LauncherError(str(exc)) from None


def _check_limits(engine: Engine, spec: RunSpec, tell: Teller) -> None:
    """Before the start: each limit the engine cannot have the kernel enforce here, and why;
    with --require-limits or the profile's limits.require (the spec's `required_by`), a
    refusal instead (nothing started, no run folder). The engine refuses too, should the
    kernel's answer change by the start."""
    preview = engine.preview(spec)
    if preview.advisory and spec.required_by:
        raise LauncherError(preview.refusal(spec.required_by))
    if preview.advisory:
        tell.warn(preview.shortfall())


def _required_by(req: RunRequest, r: Resolved) -> str | None:
    if req.require_limits:
        return "--require-limits"
    if r.profile.get("limits.require"):
        return f"limits.require ({r.profile.where('limits.require')})"
    return None


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


def _supervised_run(*, engine: Engine, spec: RunSpec, r: Resolved, run_dir: Path,
                    command: list[str], interval: float, fresh: bool, sink: OnOutput,
                    tell: Teller, growth: Any = None, overridden: Override | None = None) -> int:
    from launcher.runtime.session import plot_in_background, supervised_run
    from launcher.supervise.report import preflight
    from launcher.usecases.report import why_no_plot

    after = f"; the plan refused it, run anyway ({overridden.by})" if overridden else ""
    end = supervised_run(
        engine, spec, r, run_dir, command=command, interval=interval, fresh=fresh,
        on_output=sink, say=tell.say, growth=growth,
        on_start=lambda info: tell.say(preflight(r.caps, engine.name,
                                                 info.enforcement.sentence()) + after),
        override=overridden and (overridden.words(), overridden.to_json()))
    if end.summary is None:
        return end.status  # nothing ran (the supervisor said why): no run folder
    why = why_no_plot(end.summary["samples"])
    if why is None:
        plot_in_background(run_dir)
    tell.say(f"run {run_dir.name}: telemetry and summary in {run_dir}/"
             + (f"; no plot: {why}" if why else ", telemetry.png drawn in the background")
             + f" (`launcher report {run_dir}`)")
    if not end.started:
        tell.say("the command was not found where it ran (for a container: in the image)")
    return end.status


def _or_unlimited(n: int | None) -> str:
    return "unlimited" if n is None else str(n)
