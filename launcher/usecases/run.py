"""`launcher run`: a capped workload (container or native process), streamed, watched by
telemetry, its exit status passed on. The request is the command line's values; the workload's
output goes to `on_output`, every other line to `on_event`. Its parts: the workload's words
(run_arguments), the framework it budgets for (run_framework), what the run starts from
(run_spec), the checks before the start (run_checks), the start and the watch
(run_supervise), and --write-profile (run_write_profile). What `launcher run` imports at
its start stays small: the rest is imported where it is used."""

from __future__ import annotations

import dataclasses

from launcher.contract import die_of  # handed on: the CLI ends by the workload's signal
from launcher.errors import LauncherError
from launcher.names import NAME, NAME_RULE
from launcher.render.images import default_tag
from launcher.runtime.engines import choose_engine
from launcher.runtime.owner import OWNER_LABEL, RUN_LABEL, owner
from launcher.runtime.spec import RunSpec, build_spec
from launcher.usecases.events import OnEvent, Teller
from launcher.usecases.run_arguments import (
    check_not_a_typo,
    check_on_path,
    parse_workload_args,
    user_workload_help,
)
from launcher.usecases.run_checks import (
    check_framework,
    check_limits,
    check_verdict,
    plan_command,
    who_overrides,
    why_no_container,
)
from launcher.usecases.run_framework import choose_framework
from launcher.usecases.run_request import DryRun, OnOutput, RunRequest, RunResult
from launcher.usecases.run_spec import (
    caller,
    choose_run_id,
    mounts_of,
    runs_dir,
    who_requires_limits,
    workdir_of,
    workload_paths,
)
from launcher.usecases.run_supervise import start
from launcher.usecases.run_write_profile import check_write_profile, write_any_profile

__all__ = ["DryRun", "RunRequest", "RunResult", "RunSpec", "die_of", "plan_command", "run",
           "runs_dir"]


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
        check_not_a_typo(req.command[0], list(workloads))
    elif workload.module is None and args in (["--help"], ["-h"]):
        return RunResult(status=0, help=user_workload_help(workload))  # it has no flags
    elif (parser := workload.parser()) is not None:
        stop = parse_workload_args(parser, args)
        if stop is not None:  # its help, or its usage error: before any run folder exists
            return RunResult(status=stop)
    prof = load_profile(req.profile)
    check_write_profile(req, workload, prof)
    chosen = choose_framework(req, workload, prof)
    fw = chosen.name
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
    run_id = choose_run_id(req, workload.name if workload else command[0])
    run_dir = runs_dir() / run_id
    required_by = who_requires_limits(req, r)
    spec = build_spec(r, command, image=image, name=req.name if req.dry_run else run_id,
                      mounts=mounts_of(req), workdir=workdir_of(req),
                      user=req.user or caller(), required_by=required_by)
    spec.labels.update({RUN_LABEL: run_id, OWNER_LABEL: owner()})
    spec.interactive, spec.tty = req.interactive, req.tty
    if workload is not None and workload.module:
        workload_paths(spec, run_dir)
    if workload is None and engine.runs_host_processes:  # before any warning or start line
        check_on_path(command[0], spec.env.get("PATH"), spec.workdir)
    overridden = None
    if not req.dry_run:  # a refusal before any warning: nothing else matters then
        overridden = check_verdict(
            r, lambda: plan_command(req, workload, fw if chosen.detected else None),
            who_overrides(req, r))
        if overridden is not None and fitted is None:
            r = plain
            overridden = dataclasses.replace(overridden,
                                             reasons=tuple(plain.caps.verdict.reasons))
    if chose and req.image and engine.runs_host_processes:  # after every argument was checked
        tell.warn(f"--image {req.image} is not used: {chose}{why_no_container()}")
    elif chose and lacked_image:  # a container engine answers: its missing image is news
        tell.warn(chose)
    elif chose:
        tell.note(chose)
    if not chosen.detected:  # a detected one is on the start line
        tell.note(f"framework {fw} from {chosen.source}")
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
            framework=fw, framework_from=chosen.source,
            threads=r.caps.estimate.in_all(), estimate=r.caps.estimate.to_json(),
            verdict=r.caps.verdict.to_json(), advisory=advisory,
            refused_by=required_by if advisory else None))
    # after the checks that cost nothing: no one installs a framework to be refused then
    if workload is not None and workload.module and engine.inherits_environment:
        check_framework(workload.name, workload.framework)
    check_limits(engine, spec, tell)
    status, died_of = start(req, engine=engine, spec=spec, r=r, run_dir=run_dir, command=command,
               tell=tell, on_output=on_output, overridden=overridden,
               framework_words=chosen.start_words())
    if req.write_profile is not None:
        write_any_profile(req, status, workload, r, run_dir, command, tell)
    return RunResult(status=status, run_dir=run_dir, signal=died_of)
