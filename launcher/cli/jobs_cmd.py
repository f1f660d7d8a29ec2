"""`launcher jobs plan | run | render | status | ray-node`: the flags as requests to the job use
cases (launcher/usecases/jobs_*.py), their results in words or JSON."""

from __future__ import annotations

import sys
from typing import Any

from launcher.cli.declare import DETAILED, JSON, command
from launcher.cli.output import (
    VERDICT_STATUS,
    print_json,
    say,
    show_event,
    table,
    verdict_status,
)
from launcher.errors import Refused
from launcher.units import format_size
from launcher.usecases.jobs_plan import JobsPlanRequest
from launcher.usecases.jobs_render import JobsRenderRequest
from launcher.usecases.jobs_run import JobRun
from launcher.usecases.jobs_status import JobsStatusRequest


def plan(req: JobsPlanRequest, *, as_json: bool, detailed: bool = False) -> int:
    from launcher.usecases.jobs_plan import plan as plan_job

    try:
        got = plan_job(req)
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
    for r in got.reasons:  # the GPUs' own, where the shortfall said it at the top, left out
        print(f"  - {r}")
    return status


def run(req: JobRun, *, as_json: bool) -> int:
    from launcher.cli.jobs_progress import Progress
    from launcher.usecases.jobs_run import run as run_job
    from launcher.usecases.jobs_run import summary_lines

    got = run_job(req, progress=Progress, on_event=show_event)
    if as_json:
        print_json(got.summary)
    elif got.summary.get("ran", True):  # a job with nothing left said so in one line
        for line in summary_lines(got.summary):
            print(line)
    return got.status


def status(req: JobsStatusRequest, *, as_json: bool) -> int:
    from launcher.usecases.jobs_status import status as job_status

    got = job_status(req)
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


def render(req: JobsRenderRequest, *, as_json: bool) -> int:
    """The job rendered by the target it names (a registry's entry: launcher/render/targets.py)
    into its folder, said as the target words it."""
    from launcher.usecases.jobs_render import render as render_job

    done = render_job(req)
    if as_json:
        print_json(done.data)
        return 0
    for line in done.lines:
        print(line)
    return 0


PLAN = command("plan", JobsPlanRequest, plan, own=(DETAILED, JSON), help="""How the job is cut
and how many chunks run at once, and which bound decides: GPU slots, memory (usable x safety /
workers.memory), the profile's cap, the pids budget.""")
RUN = command("run", JobRun, run, own=(JSON,), help="""Run the chunks not finished yet: each in a
fresh process or container under the caps, one GPU and its own memory limit each; an
OOM-killed chunk is split in half and retried. Rerun the same command after Ctrl-C, kill -9 or
a reboot to go on. A backend's own options are marked with its name.""")
RENDER = command("render", JobsRenderRequest, render, own=(JSON,), help="""Write the job for a
cluster, as the target names it (${targets}): k8s, a Kubernetes Indexed Job (completions =
chunks, parallelism = the cap, GPU and memory limits, results on a PersistentVolumeClaim) and
the Dockerfile of its image; slurm, an sbatch array script. A target's own options are marked
with its name.""")
STATUS = command("status", JobsStatusRequest, status, own=(JSON,), help="Chunks done, pending, "
                 "running (where, for how long), failed (why) and split.")
