"""Every render target, as one registry (entry-point group `launcher.render_targets`). A
target's `kind` says what it renders: a profile (`launcher render`: compose, RunPod), each
given a ProfileRender and returning its files, or a job (`launcher jobs render --target`:
Kubernetes, Slurm), with a `check` of the options before anything is read and a `render` that
returns files. A new one is one module and one entry-point line; the files it returns are
written by the one writer (usecases/render.py's write_tree)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from launcher.errors import LauncherError
from launcher.flags import Flag
from launcher.registry import Registry, UnknownEntry

if TYPE_CHECKING:  # not at import: `launcher --help` lists the names without the caps
    from launcher.caps.resolve import Resolved


class PreparedJob(Protocol):
    """A job prepared for the profile's machine (launcher.jobs.job.Prepared)."""

    spec: Any  # launcher.jobs.spec.JobSpec
    resolved: Resolved
    plan: Any  # launcher.jobs.plan.JobPlan


@dataclass(frozen=True, kw_only=True)
class JobRenderOptions:
    out: Path  # the folder the files go into
    image: str | None  # what the cluster pulls (--image, else the spec's)
    workdir: str = "/workspace"
    own: dict[str, Any] = field(default_factory=dict)  # the target's own flags, where given


@dataclass(frozen=True, kw_only=True)
class RenderedJob:
    files: dict[str, str]  # a name in `out` -> its text; written whole by the caller
    lines: list[str] = field(default_factory=list)  # what to tell the user
    data: dict[str, Any] = field(default_factory=dict)  # the same, for --json


PROFILE, JOB = "profile", "job"  # what a target renders (`kind`; job where it says none)


@dataclass(frozen=True, kw_only=True)
class ProfileRender:
    """What a profile target renders from: the caps' services (one per GPU where the profile
    runs a process per GPU), their variables, the start command and the image."""

    profile: str
    image: str  # the tag a pod or a service runs
    services: dict[str, Any]  # name -> RunSpec
    per_service: dict[str, dict[str, str]]  # name -> its variables
    env: dict[str, str]  # the explicit variables (the command's and --env)
    command: list[str]
    ports: list[str]
    notes: list[str]  # what to tell the user (a target may add to it)


def kind_of(target: object) -> str:
    return str(getattr(target, "kind", JOB))


def profile_targets() -> list[Any]:
    """The targets `launcher render` writes, in registry order."""
    return [t for t in _registry.loaded() if kind_of(t) == PROFILE]


class RenderTarget(Protocol):
    name: str
    description: str
    flags: dict[str, Flag]  # its own options of `jobs render` (dest -> Flag); may be absent

    def check(self, options: JobRenderOptions) -> None:
        """The options alone, before the spec and the host are read."""

    def render(self, job: PreparedJob, options: JobRenderOptions) -> RenderedJob: ...


_registry: Registry[RenderTarget] = Registry("render target", group="launcher.render_targets",
                                             default="TARGET")


def names() -> tuple[str, ...]:
    """The targets' names, from the entry points' metadata (nothing imported)."""
    return _registry.names()


def job_names() -> tuple[str, ...]:
    """The targets `jobs render --target` takes (their modules are imported: each is light)."""
    return tuple(n for n in names() if kind_of(_registry.get(n)) == JOB)


def get(name: str) -> RenderTarget:
    """A job target by name."""
    try:
        target = _registry.get(name)
    except UnknownEntry:
        target = None
    if target is None or kind_of(target) != JOB:
        raise LauncherError(f"--target must be one of {', '.join(job_names())} (got {name!r}"
                            + (": a profile's target, `launcher render` writes it)"
                               if target is not None else ")")) from None
    return target
