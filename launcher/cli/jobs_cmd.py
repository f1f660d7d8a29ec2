"""`launcher jobs plan | run | render | status | ray-node`: the flags as requests to the job use
cases (launcher/usecases/jobs_*.py), their results in words or JSON."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

from launcher.cli.output import (
    VERDICT_STATUS,
    parse_env_pairs,
    print_json,
    say,
    show_event,
    table,
    verdict_status,
)
from launcher.errors import LauncherError, Refused
from launcher.units import format_size


def plan(spec: Path, *, profile: str | None, framework: str | None,
         max_concurrent: int | None, env: list[str] | None, as_json: bool,
         host_root: Path | None, gpus: str | None = None, detailed: bool = False) -> int:
    from launcher.usecases.jobs_plan import JobsPlanRequest
    from launcher.usecases.jobs_plan import plan as plan_job

    try:
        got = plan_job(JobsPlanRequest(spec=spec, profile=profile, framework=framework,
                                       max_concurrent=max_concurrent, env=parse_env_pairs(env),
                                       host_root=host_root, gpus=gpus))
    except Refused as exc:
        if not detailed:
            raise
        print(f"error: {exc}", file=sys.stderr)  # the verdict, as the status asked for
        return VERDICT_STATUS["refuse"]
    if got.shortfall:
        say(f"warning: {got.shortfall} (`jobs run` refuses)")
    status = verdict_status(got.prepared.resolved.caps.verdict.level, detailed)
    if as_json:
        print_json(got.data)
        return status
    p = got.prepared
    pl = p.plan
    print(f"job {p.spec.name}: {pl.sentence()}")
    print(table([(name, str(n)) for name, n in pl.bounds.items()]))
    if pl.nodes > 1:
        print(f"over the spec's {pl.nodes} nodes: {pl.job_concurrency} at once (a Kubernetes "
              f"render's parallelism; `jobs run --backend local` uses this machine alone)")
    memory = (f"its own memory limit {format_size(pl.peak_bytes)}" if pl.peak_bytes else
              f"no memory limit of its own (the profile has no workers.memory; this measures "
              f"one: `{got.bench_hint}`)")
    print(f"each chunk: {memory}, ~{pl.tasks_per_chunk} tasks"
          + (", one GPU" if pl.gpus[0] is not None else ""))
    print(f"folder: {p.spec.folder()} (ledger.sqlite, chunks/NNNNN/out)")
    for r in p.resolved.caps.verdict.reasons:
        if not (got.shortfall and "this host shows" in r):  # said once, at the top
            print(f"  - {r}")
    return status


def run(spec: Path, *, profile: str | None, framework: str | None, max_concurrent: int | None,
        env: list[str] | None, runtime: str, image: str | None, backend: str,
        address: str | None, as_json: bool, host_root: Path | None,
        gpus: str | None = None, backend_options: list[str] | None = None) -> int:
    from launcher.cli.jobs_progress import Progress
    from launcher.usecases.jobs_run import JobRun, summary_lines
    from launcher.usecases.jobs_run import run as run_job

    got = run_job(JobRun(spec=spec, profile=profile, framework=framework,
                         max_concurrent=max_concurrent, env=parse_env_pairs(env),
                         runtime=runtime, image=image, backend=backend, address=address,
                         host_root=host_root, gpus=gpus,
                         backend_options=_pairs("--backend-option", backend_options)),
                  progress=Progress, on_event=show_event)
    if as_json:
        print_json(got.summary)
    elif got.summary.get("ran", True):  # a job with nothing left said so in one line
        for line in summary_lines(got.summary):
            print(line)
    return got.status


def _pairs(flag: str, given: list[str] | None) -> dict[str, str]:
    out = {}
    for pair in given or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise LauncherError(f"{flag}: expected KEY=VALUE (got {pair!r})")
        out[key] = value
    return out


def status(target: Path, as_json: bool) -> int:
    from launcher.usecases.jobs_status import JobsStatusRequest
    from launcher.usecases.jobs_status import status as job_status

    got = job_status(JobsStatusRequest(target=target))
    if as_json:
        print_json(got.data)
        return 0
    for line in _status_lines(got.data, got.info, got.holder):
        print(line)
    return 0


def _runner_line(data: dict[str, Any], holder: str | None) -> str:
    """Who runs the job; else how to go on, or that it is finished (nothing to go on with)."""
    c = data["counts"]
    if holder:
        return f"runner: {holder}"
    if not data["finished"]:
        return f"runner: none; to go on: `{data['rerun']}`"
    if c["failed"]:
        return (f"finished: {c['done']} done, {c['failed']} failed (why, below); a rerun runs "
                f"nothing more")
    return f"finished: every chunk done ({c['done']} of {c['done']})"


def _status_lines(data: dict[str, Any], info: dict[str, Any], holder: str | None) -> list[str]:
    from launcher.usecases.jobs_status import run_line, summary_lines

    c, folder = data["counts"], data["folder"]
    out = [f"job {info.get('name')} in {folder}: {c['done']} done, {c['pending']} pending, "
           + (f"{c['running']} running, " if holder else f"{c['interrupted']} interrupted, ")
           + f"{c['failed']} failed, {c['split']} split ({data['items_done']} of "
             f"{info.get('items')} items)",
           _runner_line(data, holder)]
    for r in data["running_now"]:
        out.append(f"  running: chunk {r['chunk']} (items {r['items'][0]}-{r['items'][1]}) on "
                   f"{r['slot']}{'' if r['gpu'] is None else ' GPU ' + str(r['gpu'])} for "
                   f"{r['for_s']}s")
    for r in data["interrupted"]:
        out.append(f"  interrupted: chunk {r['chunk']} (items {r['items'][0]}-{r['items'][1]})"
                   f" on {r['slot']}{'' if r['gpu'] is None else ' GPU ' + str(r['gpu'])}: its "
                   f"launcher is gone; a rerun runs it again (or records it done if it had "
                   f"finished)")
    out += (data.get("external") or {}).get("lines", [])  # the backend's scheduler's words
    out += summary_lines(data)[1:]
    last = data["last_run"]
    if last and last.get("wall_s") is not None:
        out.append("last " + run_line(last).removeprefix("this "))
    return out


def render(spec: Path, *, target: str, out: Path, profile: str | None, image: str | None,
           max_concurrent: int | None, gpus: str | None, workdir: str,
           host_root: Path | None, as_json: bool, claim: str | None = None,
           claim_size: str | None = None, base_image: str | None = None) -> int:
    """The job rendered by the target `target` (a registry's entry: launcher/render/targets.py)
    into `out`, said as the target words it."""
    from launcher.usecases.jobs_render import JobsRenderRequest
    from launcher.usecases.jobs_render import render as render_job

    done = render_job(JobsRenderRequest(
        spec=spec, target=target, out=out, profile=profile, image=image,
        max_concurrent=max_concurrent, gpus=gpus, workdir=workdir, host_root=host_root,
        claim=claim, claim_size=claim_size, base_image=base_image))
    if as_json:
        print_json(done.data)
        return 0
    for line in done.lines:
        print(line)
    return 0


def ray_node(profile: str, address: str | None, gpus: str | None, host_root: Path | None,
             as_json: bool) -> int:
    """The `ray start` command that declares this node's GPUs, memory and cap."""
    from launcher.usecases.jobs_ray_node import RayNodeRequest
    from launcher.usecases.jobs_ray_node import ray_node as node

    got = node(RayNodeRequest(profile=profile, address=address, gpus=gpus,
                              host_root=host_root))
    if as_json:
        print_json({"command": got.command, "cap": got.cap, "binding": got.binding})
        return 0
    print(shlex.join(got.command))
    say(f"cap {got.cap} chunks on this node ({got.binding})")
    return 0
