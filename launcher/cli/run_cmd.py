"""`launcher run WORKLOAD [ARGS] | -- CMD...`: a capped workload (container or native process),
streamed, watched by telemetry, its exit status passed on."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from launcher.caps.model import threads_in_all
from launcher.caps.resolve import Resolved, resolve
from launcher.caps.verdict import GPU_SHORT
from launcher.cli.common import fit_or_advise
from launcher.cli.output import note, parse_env_pairs, print_json, say
from launcher.errors import LauncherError
from launcher.names import NAME, NAME_RULE
from launcher.render.images import default_tag
from launcher.runtime.engine import BuildEvent, Engine, ImageNotFound, OutputClosed
from launcher.runtime.engines import choose_engine
from launcher.runtime.owner import OWNER_LABEL, RUN_LABEL, owner
from launcher.runtime.spec import Mount, RunSpec, build_spec
from launcher.units import format_rlimit, format_size, mib_up
from launcher.workloads.catalog import Workload

if TYPE_CHECKING:  # argparse comes with a workload's parser, only when one is named
    import argparse


def runs_dir() -> Path:
    return Path(os.environ.get("LAUNCHER_RUNS_DIR") or "runs")


@dataclass(kw_only=True)
class RunOptions:
    command: list[str]
    profile: str = "auto"
    framework: str | None = None
    processes: int | None = None
    runtime: str = "auto"
    image: str | None = None
    gpus: str | None = None
    env: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)
    workdir: str | None = None
    user: str | None = None
    mount_cwd: bool = True
    name: str | None = None
    resume: str | None = None
    dry_run: bool = False
    as_json: bool = False
    interval: float = 1.0
    host_root: Path | None = None
    write_profile: Path | None = None
    fit: bool = False  # shrink the pools to fit the pids budget instead of refusing
    require_limits: bool = False  # refuse rather than run with a limit the kernel cannot keep


def run(o: RunOptions) -> int:
    from launcher.probe import probe_host
    from launcher.profiles import load_profile
    from launcher.workloads.catalog import catalog

    if o.as_json and not o.dry_run:
        raise LauncherError("--json describes a dry run (--dry-run --json); a run's summary is "
                            "runs/RUN-ID/summary.json, and `launcher report RUN_DIR --json` "
                            "prints it")
    if not o.command:
        raise LauncherError("nothing to run: give a workload (see `launcher workloads`) or a "
                            "command after --, e.g. `launcher run -- python3 -c 'import numpy'`")
    overrides = parse_env_pairs(o.env)
    workloads = catalog()
    workload = workloads.get(o.command[0])
    if workload is None:
        _check_not_a_typo(o.command[0], list(workloads))
    elif workload.module is None and o.command[1:] in (["--help"], ["-h"]):
        print(_user_workload_help(workload))  # what it runs: it has no flags of launcher's
        return 0
    elif (parser := workload.parser()) is not None:
        stop = _parse_workload_args(parser, o.command[1:])
        if stop is not None:  # its help, or its usage error: before any run folder exists
            return stop
    prof = load_profile(o.profile)
    if o.write_profile is not None and (workload is None or workload.module is None or not
                                        hasattr(workload.module_object(), "recommendation")):
        raise LauncherError("--write-profile: only a stress run writes a profile (stress-jax, "
                            "pytorch-phase3)")
    if o.write_profile is not None and any(a == "--out" or a.startswith("--out=")
                                           for a in o.command[1:]):
        raise LauncherError("--write-profile reads the results from the run's folder: leave "
                            "out the workload's --out")
    if o.write_profile is not None:
        from launcher.profiles.writer import check_target

        check_target(o.write_profile, prof, "--write-profile")
    fw = (o.framework or (workload.framework if workload else None)
          or prof.get("framework", "none"))
    image = o.image or default_tag(prof.name, fw)
    if o.name is not None and not NAME.match(o.name):
        raise LauncherError(f"--name must be {NAME_RULE} (got {o.name!r})")
    # an image named with --image is pulled when missing: auto takes the first engine that
    # answers; the default tag is a local build, never pulled
    engine, chose = choose_engine(o.runtime, image, check_image=o.image is None)
    command = workload.argv(o.command[1:], engine.python) if workload else o.command
    facts = probe_host(o.host_root or "/")
    r = resolve(prof, facts, framework=fw, processes=o.processes, overrides=overrides,
                gpus=o.gpus, inherited=facts.env if engine.inherits_environment else {},
                clamp=True, extra_threads=workload.extra_threads if workload else 0)
    r, fitted = fit_or_advise(r, o.fit)
    run_id = _run_id(o, workload.name if workload else command[0])
    run_dir = runs_dir() / run_id
    spec = build_spec(r, command, image, name=o.name if o.dry_run else run_id,
                      mounts=_mounts(o), workdir=_workdir(o), user=o.user or _caller())
    spec.labels.update({RUN_LABEL: run_id, OWNER_LABEL: owner()})
    if workload is not None and workload.module:
        _workload_paths(spec, run_dir)
    if chose and o.image and engine.runs_host_processes:  # after every argument was checked
        say(f"warning: --image {o.image} is not used: {chose}{_why_no_container()}")
    elif chose:
        note(chose)
    if fitted:
        say(fitted)
    if o.dry_run:
        if r.selection.shortfall:
            say(f"warning: {r.selection.shortfall} (a real run refuses)")
        request = engine.describe(spec)
        advisory = engine.preview(spec).advisory  # what a real run could not enforce here
        by = _required_by(o, r)
        if o.as_json:
            print_json({"runtime": engine.name, "spec": spec.to_json(), "request": request,
                        "threads_estimate": r.caps.estimate,
                        "verdict": r.caps.to_json()["verdict"],
                        "advisory": advisory, "refused_by": by if advisory else None})
        else:
            print(describe_spec(engine.name, spec))
            print(f"threads: {threads_in_all(r.caps.estimate)} estimated for the whole run "
                  f"({r.caps.estimate['source']})")
            for cap, why in advisory.items():
                print(f"advisory here: {cap} ({why})")
            if advisory and by:
                print(f"a real run refuses: {by}")
        return 0
    if r.caps.verdict.level == "refuse":  # every reason at once (a GPU shortfall's too)
        reasons = r.caps.verdict.reasons
        if r.selection.shortfall:  # its own words: how many this host has, and what to pass
            reasons = [x for x in reasons if not x.startswith(GPU_SHORT)]
            reasons.append(f"{r.selection.shortfall[0].upper()}{r.selection.shortfall[1:]}.")
        raise LauncherError("refused: " + " ".join(reasons) +
                            f" (see `{plan_command(o, workload)}`)")
    if r.selection.shortfall:
        raise LauncherError(r.selection.shortfall)
    # after the checks that cost nothing: no one installs a framework to be refused then
    if workload is not None and workload.module and engine.inherits_environment:
        _check_framework(workload.name, workload.framework)
    _check_limits(engine, spec, _required_by(o, r))
    leftovers = threading.Thread(target=_report_leftovers, args=(engine,), daemon=True)
    leftovers.start()
    from launcher.supervise.report import report, thread_summary

    report(r.caps, True, say)  # inherited values replaced and warnings: always
    note(f"thread values from: {thread_summary(r.caps)}; pids budget "
         f"{_or_unlimited(r.caps.budget['available'])} ({r.caps.budget['binding']})")
    _report_lowered_ulimits(r)
    fresh = not run_dir.exists()
    try:
        _make_run_dir(run_dir)
        status = _supervised_run(engine, spec, r, run_dir, command, o.interval, fresh)
    except ImageNotFound:
        if not o.image:
            raise
        _pull(engine, o.image)
        _make_run_dir(run_dir)
        status = _supervised_run(engine, spec, r, run_dir, command, o.interval, fresh)
    leftovers.join(timeout=2)
    if status == 0 and o.write_profile is not None and workload is not None:
        _write_profile(o.write_profile, workload, r, run_dir)
    return status


def plan_command(o: RunOptions, workload: Workload | None) -> str:
    """The `launcher plan` that shows this run's verdict: the same profile and options."""
    words = ["launcher", "plan", "--profile", o.profile]
    for flag, value in (("--framework", o.framework), ("--processes", o.processes),
                        ("--gpus", o.gpus), ("--workload", workload and workload.name),
                        ("--host-root", o.host_root)):
        if value is not None:
            words += [flag, str(value)]
    for pair in o.env:
        words += ["--env", pair]
    return shlex.join(words + ["--fit"] * o.fit)


def _why_no_container() -> str:
    """Why the container engines `--runtime auto` passed over do not answer (a socket this
    user may not open is no stopped daemon)."""
    from launcher.runtime.engines import AUTO_ORDER, get_engine

    reasons = []
    for name in AUTO_ORDER:
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


def _pull(engine: Engine, image: str) -> None:
    """An image named with --image that is not here: pulled, its progress a line a second
    (a failed pull: one line, the error)."""

    def show(event: BuildEvent) -> None:
        say(event.text)

    engine.pull(image, show)


def _report_lowered_ulimits(r: Resolved) -> None:
    """A ulimit lowered to this host's hard limit: a warning when the user's own profile asked
    for more, a note (-v) when it is a shipped default (nofile 1048576 on an ordinary host).
    A memory limit lowered to this host's memory: always a warning (a profile written for a
    bigger machine)."""
    memory = r.caps.limits.get("memory")
    if memory is not None and "lowered to this host's memory" in memory.source:
        say(f"warning: memory limit: {memory.source}")
    for name, u in r.caps.ulimits.items():
        if "lowered" in u.source:
            line = f"ulimit {name}: {u.source}"
            if r.profile.from_shipped(f"limits.{name}"):
                note(line)
            else:
                say(f"warning: {line}")


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

    from launcher.frameworks import get as get_framework

    fw = get_framework(framework)
    if importlib.util.find_spec(fw.module) is None:
        raise LauncherError(f"{workload} needs {fw.module}, which is not installed for "
                            f"{sys.executable}: pip install {fw.install!r} (or run it in an "
                            f"image that has it: --image IMG)")


def _write_profile(path: Path, workload: Workload, r: Resolved, run_dir: Path) -> None:
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
    notes.append(f"threads: the pools this run had ({r.caps.estimate['source']}); peak "
                 f"{threads.get('peak')} threads observed, {threads.get('estimate')} "
                 f"estimated, run {run_dir.name}.")
    by = f"launcher run {workload.name} --write-profile"
    write_profile(path, r.profile, by, sections, notes)
    say(f"wrote {path}: `launcher plan --profile {shown(path)}`; a run under it uses "
        f"{', '.join(f'{k} {v}' for k, v in found.items())}")


def _user_workload_help(w: Workload) -> str:
    """A user workload's --help: what it runs, from where; its command's own --help is a
    command to paste."""
    command = shlex.join([*w.command, *w.args])
    framework = ["--framework", w.framework] if w.framework != "none" else []
    return (f"{w.name}: {w.description or '(no description)'}\n"
            f"  defined in {w.source}\n"
            f"  runs: {command} [ARGS...]  (framework {w.framework})\n"
            f"every word after the name is the command's; its own --help: "
            f"`{shlex.join(['launcher', 'run', *framework, '--', *w.command, *w.args, '--help'])}`")


def _check_not_a_typo(word: str, names: list[str]) -> None:
    """A first word that is no workload, no command here, and close to a workload name."""
    import difflib

    if "/" in word or shutil.which(word):
        return
    close = difflib.get_close_matches(word, names, n=1, cutoff=0.75)
    if close:
        raise LauncherError(f"{word!r} is neither a workload nor a command on PATH; did you "
                            f"mean the workload {close[0]!r}? (`launcher workloads` lists them)")


def _run_id(o: RunOptions, what: str) -> str:
    if o.resume:
        if not (runs_dir() / o.resume).is_dir():
            raise LauncherError(f"--resume {o.resume}: no such run in {runs_dir()}/")
        return o.resume
    if o.name:
        return o.name
    slug = "".join(c if c.isalnum() or c in "-_" else "-" for c in Path(what).name)[:24]
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{slug or 'run'}-{os.urandom(2).hex()}"


def _caller() -> str:
    """Files the workload writes into mounted folders belong to the calling user."""
    return f"{os.getuid()}:{os.getgid()}"


def _mounts(o: RunOptions) -> list[Mount]:
    mounts = []
    cwd = os.getcwd()
    if o.mount_cwd and cwd != "/":
        mounts.append(Mount(cwd, cwd))
    for v in o.volumes:
        m = Mount.parse(v)
        src = os.path.abspath(os.path.expanduser(m.source))
        if not os.path.exists(src):
            raise LauncherError(f"--volume {v}: no such file or folder {src!r}")
        if not m.target.startswith("/"):
            raise LauncherError(f"--volume {v}: the target must be an absolute path")
        mounts.append(Mount(src, m.target, m.read_only))
    return mounts


def _workdir(o: RunOptions) -> str | None:
    if o.workdir:
        if not o.workdir.startswith("/"):
            raise LauncherError(f"--workdir must be an absolute path (got {o.workdir!r})")
        return o.workdir
    cwd = os.getcwd()
    return cwd if o.mount_cwd and cwd != "/" else None


def _workload_paths(spec: RunSpec, run_dir: Path) -> None:
    """Built-in workloads import launcher and write into the run folder: the runs folder is
    mounted at its own path, so paths read the same inside and out."""
    runs = str(runs_dir().resolve())
    spec.imports_launcher = True
    if not any(m.source == runs for m in spec.mounts):
        spec.mounts.append(Mount(runs, runs))
    spec.env["LAUNCHER_RUNS_DIR"] = runs
    spec.env["LAUNCHER_RUN_DIR"] = str(run_dir.resolve())


def _check_limits(engine: Engine, spec: RunSpec, required_by: str | None) -> None:
    """Before the start: each limit the engine cannot have the kernel enforce here, and why;
    with --require-limits or the profile's limits.require (`required_by`), a refusal instead
    (nothing started, no run folder)."""
    preview = engine.preview(spec)
    engine.require_limits = required_by is not None  # the engine refuses too, should it change
    engine.required_by = required_by or engine.required_by
    if preview.advisory and required_by:
        raise LauncherError(preview.refusal(required_by))
    if preview.advisory:
        say(f"warning: {preview.shortfall()}")


def _required_by(o: RunOptions, r: Resolved) -> str | None:
    if o.require_limits:
        return "--require-limits"
    if r.profile.get("limits.require"):
        return f"limits.require ({r.profile.where('limits.require')})"
    return None


def _report_leftovers(engine: Engine) -> None:
    """Beside the run (a thread): what killed runs left behind, in one line; what holds
    nothing (a container never started, an empty run cgroup) is removed."""
    from launcher.runtime.engines import tidy_leftovers

    try:
        _, left = tidy_leftovers(engine)
    except Exception:  # noqa: BLE001 - a report must never disturb the run
        return
    if left:
        what = ", ".join(left[:3]) + (f" and {len(left) - 3} more" if len(left) > 3 else "")
        say(f"warning: earlier launcher runs that were killed left {what} behind; "
            f"`launcher doctor --clean` removes them")


def _print_output(stream: str, data: bytes) -> None:
    target = sys.stdout if stream == "stdout" else sys.stderr
    try:
        target.buffer.write(data)
        target.buffer.flush()
    except BrokenPipeError:  # `launcher run ... | head`: the reader is gone
        with contextlib.suppress(OSError):  # nothing more to write there, nor at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), target.fileno())
        raise OutputClosed(stream) from None


def _supervised_run(engine: Engine, spec: RunSpec, r: Resolved, run_dir: Path,
                    command: list[str], interval: float, fresh: bool) -> int:
    from launcher.cli.report_cmd import why_no_plot
    from launcher.runtime.session import plot_in_background, supervised_run
    from launcher.supervise.report import preflight

    end = supervised_run(
        engine, spec, r, run_dir, command=command, interval=interval, fresh=fresh,
        on_output=_print_output, say=say,
        on_start=lambda info: say(preflight(r.caps, engine.name, info.enforcement.sentence())))
    if end.summary is None:
        return end.status  # nothing ran (the supervisor said why): no run folder
    why = why_no_plot(end.summary["samples"])
    if why is None:
        plot_in_background(run_dir)
    say(f"run {run_dir.name}: telemetry and summary in {run_dir}/"
        + (f"; no plot: {why}" if why else ", telemetry.png drawn in the background")
        + f" (`launcher report {run_dir}`)")
    if not end.started:
        say("the command was not found where it ran (for a container: in the image)")
    return end.status


def describe_spec(runtime: str, spec: RunSpec) -> str:
    """A dry run for people: the spec in words, sizes with units (--json has everything)."""
    lim = spec.limits
    lines = [f"dry run ({runtime}): {spec.image or '(no image)'}",
             f"  command: {' '.join(spec.command)}"]
    limits = [f"pids {lim.pids}" if lim.pids else "",
              f"memory {format_size(lim.memory)}" + (" (no swap)" if lim.swap == 0 else "")
              if lim.memory else "",
              f"shm {format_size(lim.shm)}" if lim.shm else "",
              f"cpus {lim.cpus:g}" if lim.cpus else ""]
    lines.append(f"  limits: {', '.join(x for x in limits if x) or 'none of ours'}")
    if spec.ulimits:
        lines.append("  ulimits: " + ", ".join(
            f"{n} {format_rlimit(n, u.soft)}/{format_rlimit(n, u.hard)}"
            for n, u in spec.ulimits.items()))
    if spec.gpus.ids:
        a = spec.gpu_access
        access = [f"devices {', '.join(a.devices)}" if a.devices else "",
                  f"groups {', '.join(a.groups)}" if a.groups else "",
                  "seccomp unconfined" if a.unconfined_syscalls else "",
                  (f"device request {a.request.driver} "
                   f"{'all' if a.request.ids is None else ','.join(a.request.ids)}")
                  if a.request else ""]
        lines.append(f"  gpus: {spec.gpus.vendor} {'all' if spec.gpus.all else ''} "
                     f"{', '.join(map(str, spec.gpus.ids))}; "
                     + "; ".join(x for x in access if x))
    for m in spec.mounts:
        lines.append(f"  mount: {m.source} -> {m.target}{' (read-only)' if m.read_only else ''}")
    if spec.workdir:
        lines.append(f"  workdir: {spec.workdir}")
    if spec.user:
        lines.append(f"  user: {spec.user}")
    lines.append("  environment:")
    lines += [f"    {k}={v}" for k, v in spec.supervisor_env().items()]
    lines.append("  (the exact request: add --json)")
    return "\n".join(lines)


def _or_unlimited(n: int | None) -> str:
    return "unlimited" if n is None else str(n)
