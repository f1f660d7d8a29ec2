"""A job from its spec to its summary (`launcher jobs run`): the CLI parses and prints, this
module orchestrates: prepare, lock, the ledger, the backend's slots, the pull queue, the
summary."""

from __future__ import annotations

import contextlib
import dataclasses
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.defaults import LOCAL, NATIVE
from launcher.errors import LauncherError
from launcher.flags import (
    ENV,
    FRAMEWORK,
    GPUS,
    HOST_ROOT,
    JOB_PROFILE,
    MAX_CONCURRENT,
    SPEC,
    Flag,
    argv_of,
    flag,
    plugin_flags,
)
from launcher.jobs import summary as summ
from launcher.jobs.backends import check_options, flags_of, get_backend, on_this_host
from launcher.jobs.job import GpuSampler, open_ledger, prepare, read_items, write_summary
from launcher.jobs.runner import PullQueue, lock_job
from launcher.runtime.engines import get_engine, names, tidy_leftovers
from launcher.runtime.owner import owner


@dataclass(frozen=True, kw_only=True)
class JobRun:
    """What `launcher jobs run` was asked for: its flags, declared here once."""

    spec: Path = flag(SPEC, dataclasses.MISSING)
    profile: str | None = flag(JOB_PROFILE)
    framework: str | None = flag(FRAMEWORK)
    max_concurrent: int | None = flag(MAX_CONCURRENT)
    gpus: str | None = flag(GPUS)
    env: dict[str, str] = flag(ENV, {})
    runtime: str = flag(Flag(("--runtime",), "${runtimes}: native runs a fresh process per "
                             "chunk, the others a container per chunk"), NATIVE)
    image: str | None = flag(Flag(("--image",), "Image for a container runtime (default: the "
                                  "spec's, else launcher/PROFILE:FRAMEWORK)."))
    backend: str = flag(Flag(("--backend",), "Where the chunks run: ${backends} (local: this "
                             "machine; the others: a cluster's nodes)."), LOCAL)
    host_root: Path | None = flag(HOST_ROOT)
    backend_options: dict[str, Any] = plugin_flags("launcher.backends")  # the backends' own


def rerun_command(job: JobRun) -> str:
    """`launcher jobs run` as this run was asked for, its paths absolute: pasted in any folder,
    it goes on with the same job (`jobs status` shows it when no launcher holds the job)."""
    job = dataclasses.replace(job, spec=job.spec.resolve(), profile=_profile_arg(job.profile))
    argv = ["launcher", "jobs", "run", *argv_of(job)]
    declared = flags_of(job.backend)
    for key, value in job.backend_options.items():
        argv += [declared[key].opts[0], str(value)]
    return shlex.join(argv)


def _profile_arg(profile: str | None) -> str | None:
    """A profile path made absolute (a bare name is a profile's name, found anywhere)."""
    if profile and ("/" in profile or profile.endswith((".yaml", ".yml"))):
        return str(Path(profile).resolve())
    return profile


def run_job(job: JobRun, progress: Callable[[int, int], Any],
            say: Callable[[str], None]) -> tuple[dict[str, Any], bool]:
    """A job from its spec to its summary: prepared, locked, its ledger opened, its pending
    chunks run over the backend's slots by the pull queue, the summary written. `progress`
    makes what shows progress from (total items, items done before); `say` takes a line for
    the user. Returns the summary and whether the queue ran to its end (not stopped)."""
    if job.runtime not in names():
        raise LauncherError(f"--runtime must be one of {', '.join(names())} "
                            f"(got {job.runtime!r})")
    here = on_this_host(job.backend)
    check_options(job.backend, job.backend_options)
    p = prepare(job.spec, profile=job.profile, framework=job.framework,
                max_concurrent=job.max_concurrent, env=job.env, host_root=job.host_root,
                inherit_shell=get_engine(job.runtime).inherits_environment, gpus=job.gpus,
                running=True, on_this_host=here)
    folder = p.spec.folder()
    folder.mkdir(parents=True, exist_ok=True)
    release = lock_job(str(folder / ".lock"))
    try:
        ledger, notes = open_ledger(p)
        rerun = rerun_command(job)
        ledger.set_meta("rerun", rerun)
        ledger.set_meta("backend", job.backend)  # `jobs status` asks it what it knows
        for note in notes:
            say(note)
        counts = ledger.counts()
        if counts["pending"] == 0:  # the last run's figures stay as they are
            say(f"job {p.spec.name}: nothing left to run ({counts['done']} done, "
                f"{counts['failed']} failed); see `launcher jobs status "
                f"{shlex.quote(str(folder))}`")
            s = summ.summarize(ledger, 1)
            ledger.close()
            return s | {"job": p.spec.name, "folder": str(folder), "ran": False}, True
        if here:  # what killed runs left here that holds nothing goes
            with contextlib.suppress(LauncherError):
                tidy_leftovers(get_engine(job.runtime))
        be = get_backend(job.backend, p, folder, read_items(p.spec),
                         {"runtime": job.runtime, "image": job.image, **job.backend_options})
        slots = be.slots()
        say(f"job {p.spec.name}: {be.concurrency_note()}; {counts['pending']} chunks pending, "
            f"{counts['done']} done; ledger in {folder}")
        shown = progress(p.spec.items, sum(c.size for c in ledger.chunks("done")))
        gpus = GpuSampler()
        if gpus.sampler.any:
            gpus.start()
        started, since = time.monotonic(), time.time()
        queue = PullQueue(p.spec, p.plan, ledger=ledger, executor=be.executor(),
                          progress=shown, runner_id=owner(), slots=slots, say=say, rerun=rerun)
        try:
            finished = queue.run()
        finally:
            shown.close()
            gpus.done.set()
            be.close()
        s = summ.summarize(ledger, len(slots), wall_s=time.monotonic() - started,
                           busy=queue.busy, gpu_util=gpus.means(), since=since)
        s["job"], s["folder"], s["backend"] = p.spec.name, str(folder), job.backend
        write_summary(folder, s)
        ledger.close()
    finally:
        release()
    return s, finished
