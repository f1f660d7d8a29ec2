"""`launcher jobs render --target T`: a job rendered by a render target (launcher/render/
targets.py) for the profile's machine, its files written whole into a folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from launcher.render.targets import JobRenderOptions, RenderedJob
from launcher.render.targets import get as get_target

__all__ = ["JobsRenderRequest", "RenderedJob", "render"]


@dataclass(frozen=True, kw_only=True)
class JobsRenderRequest:
    spec: Path
    target: str
    out: Path
    profile: str | None = None
    image: str | None = None  # default: the spec's
    max_concurrent: int | None = None
    gpus: str | None = None
    workdir: str = "/workspace"
    host_root: Path | None = None
    claim: str | None = None
    claim_size: str | None = None
    base_image: str | None = None


def render(req: JobsRenderRequest) -> RenderedJob:
    from launcher.jobs.job import prepare
    from launcher.jobs.spec import load_job

    target = get_target(req.target)
    options = JobRenderOptions(out=req.out, image=req.image or load_job(req.spec).image,
                               workdir=req.workdir, claim=req.claim, claim_size=req.claim_size,
                               base_image=req.base_image)
    target.check(options)
    p = prepare(req.spec, profile=req.profile, max_concurrent=req.max_concurrent,
                host_root=req.host_root, inherit_shell=False, gpus=req.gpus,
                on_this_host=False)  # for the cluster, not this shell
    rendered = target.render(p, options)
    req.out.mkdir(parents=True, exist_ok=True)
    for name, text in rendered.files.items():
        _write(req.out / name, text)
    return rendered


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
