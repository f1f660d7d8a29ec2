"""`launcher bench-memory`: a job's real worker measured at several chunk sizes, each alone in
its own capped cgroup (and some at once, when asked); the fit, and a profile written with what
was measured."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.errors import LauncherError
from launcher.flags import ENV, GPUS, HOST_ROOT, JOB_PROFILE, Flag, flag
from launcher.profiles.writer import shown
from launcher.units import format_size
from launcher.usecases.events import OnEvent, Teller

__all__ = ["BenchRequest", "BenchResult", "bench", "shown"]


@dataclass(frozen=True, kw_only=True)
class BenchRequest:
    spec: Path = flag(Flag((), "The job spec (YAML) whose worker to measure.", kind="path",
                           metavar="SPEC"), dataclasses.MISSING)
    sizes: tuple[int, ...] = flag(Flag(("--sizes",), "Chunk sizes to run the worker at, e.g. "
                                       "500,1000,2000.", kind="ints"), dataclasses.MISSING)
    profile: str | None = flag(JOB_PROFILE)
    predict: int | None = flag(Flag(("--predict",), "Also predict the peak at this many items.",
                                    kind="int", minimum=1))
    concurrent: int | None = flag(Flag(("--concurrent",), "Also run this many workers at once "
                                       "(peaks are not additive).", kind="int", minimum=2))
    write_profile: Path | None = flag(Flag(
        ("--write-profile",), "Write a profile (FILE.yaml) extending --profile with "
        "workers.memory and jobs.chunk_size (no jobs.max_concurrent: `jobs plan` works it out "
        "on the machine that runs the job).", kind="path"))
    gpus: str | None = flag(GPUS)
    env: dict[str, str] = flag(ENV, {})
    host_root: Path | None = flag(HOST_ROOT)


@dataclass(frozen=True, kw_only=True)
class BenchResult:
    data: dict[str, Any]  # the fit, the chunk size, the prediction (--json)
    machine: str  # the profile whose machine the chunk size is for
    written: bool  # the profile was written (not when no chunk size could be given)


def bench(req: BenchRequest, *, on_event: OnEvent | None = None) -> BenchResult:
    from launcher.jobs import memory
    from launcher.jobs.job import prepare, read_items

    tell = Teller(on_event)
    sizes = list(req.sizes)
    if len(sizes) < 2 or any(s < 1 for s in sizes):
        raise LauncherError(f"--sizes: give at least two positive item counts (got "
                            f"{','.join(map(str, sizes))!r})")
    p = prepare(req.spec, profile=req.profile, env=dict(req.env), host_root=req.host_root,
                gpus=req.gpus, running=True)
    if req.write_profile is not None:
        from launcher.profiles.writer import check_target

        check_target(req.write_profile, p.resolved.profile, "--write-profile")
    folder = p.spec.folder() / "bench-memory"
    folder.mkdir(parents=True, exist_ok=True)
    items = read_items(p.spec)
    where = f"GPU {p.plan.gpus[0]}" if p.plan.gpus[0] is not None else "the CPU"
    tell.say(f"bench-memory {p.spec.name}: sizes {', '.join(map(str, sizes))} on {where}, "
             f"each alone in its own cgroup (cap {format_size(p.plan.usable_bytes or 0) or '-'}"
             f"), after a warm-up run at {min(sizes)} items that is not counted (the first "
             f"run's page cache would be)")
    ms = memory.measure(p, sizes, folder, items, tell.say)
    conc = None
    if req.concurrent:
        size = p.spec.chunk_size or max(sizes)
        tell.say(f"{req.concurrent} workers of {size} items at once ...")
        conc = memory.measure_concurrent(p, size, req.concurrent, folder, items)
    # the chunk size and concurrency for the profile's machine (its GPUs), not this host's
    target = prepare(req.spec, profile=req.profile, env=dict(req.env), host_root=req.host_root,
                     on_this_host=False)
    result = memory.result_of(p, ms, req.predict, conc, target)
    written = req.write_profile is not None and result["chunk_size"] is not None
    if written:
        memory.write_profile(p, req.write_profile, result)
        result["profile_written"] = str(req.write_profile)
    return BenchResult(data=result, machine=target.resolved.profile.name, written=written)
