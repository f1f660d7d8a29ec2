"""`launcher jobs render --target T`: a job rendered by a render target (launcher/render/
targets.py) for the profile's machine, its files written whole into a folder."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.defaults import K8S
from launcher.errors import LauncherError
from launcher.flags import (
    GPUS,
    HOST_ROOT,
    JOB_PROFILE,
    MAX_CONCURRENT,
    SPEC,
    Flag,
    flag,
    plugin_flags,
)
from launcher.render.targets import JOB, JobRenderOptions, RenderedJob
from launcher.render.targets import get as get_target
from launcher.usecases.render import write_tree

__all__ = ["JobsRenderRequest", "RenderedJob", "render"]


@dataclass(frozen=True, kw_only=True)
class JobsRenderRequest:
    spec: Path = flag(SPEC, dataclasses.MISSING)
    out: Path = flag(Flag(("--out", "-o"), "Folder to write the manifest into.", kind="path"),
                     dataclasses.MISSING)
    target: str = flag(Flag(("--target",), "What to render the job as: ${targets}."), K8S)
    profile: str | None = flag(JOB_PROFILE)
    image: str | None = flag(Flag(
        ("--image",), "The image the pods pull, pushed (REGISTRY/NAME:TAG): launcher's image "
        "with the job's folder (the Dockerfile this writes); needed by --target k8s unless the "
        "spec names one."))
    workdir: str = flag(Flag(("--workdir",), "The worker's folder in the image."), "/workspace")
    max_concurrent: int | None = flag(MAX_CONCURRENT)
    gpus: str | None = flag(GPUS)
    host_root: Path | None = flag(HOST_ROOT)
    target_options: dict[str, Any] = plugin_flags("launcher.render_targets", JOB)


def render(req: JobsRenderRequest) -> RenderedJob:
    from launcher.jobs.job import prepare
    from launcher.jobs.spec import load_job

    target = get_target(req.target)
    mine = getattr(target, "flags", {})
    for dest in req.target_options:
        if dest not in mine:
            raise LauncherError(f"{_spelling(dest)} is no option of --target {req.target}")
    options = JobRenderOptions(out=req.out, image=req.image or load_job(req.spec).image,
                               workdir=req.workdir, own=dict(req.target_options))
    target.check(options)
    p = prepare(req.spec, profile=req.profile, max_concurrent=req.max_concurrent,
                host_root=req.host_root, inherit_shell=False, gpus=req.gpus,
                on_this_host=False)  # for the cluster, not this shell
    rendered = target.render(p, options)
    write_tree(req.out, rendered.files, force=True, package=False)  # a rerun replaces them
    return rendered


def _spelling(dest: str) -> str:
    """How the flag that fills `dest` is spelt, by whichever target declares it."""
    from launcher.render.targets import job_names

    for name in job_names():
        declared = getattr(get_target(name), "flags", {})
        if dest in declared:
            return str(declared[dest].opts[0])
    return dest
