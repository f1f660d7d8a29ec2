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
    notes: list[str]  # what to tell the user (a target may add to it)
    own: dict[str, Any] = field(default_factory=dict)  # the targets' own flags, where given
    push: str | None = None  # the `launcher build --push` to name, where `image` is local
    lacking_groups: list[str] = field(default_factory=list)  # the vendor's, not on this host


def kind_of(target: object) -> str:
    return str(getattr(target, "kind", JOB))


def profile_targets(chosen: tuple[str, ...] = ()) -> list[Any]:
    """The targets `launcher render` writes, in registry order: those `chosen`, else all."""
    return [t for t in _registry.loaded() if kind_of(t) == PROFILE
            and (not chosen or t.name in chosen)]


def profile_names() -> tuple[str, ...]:
    """The targets `launcher render --target` takes."""
    return tuple(t.name for t in profile_targets())


def check_profile_options(chosen: tuple[str, ...], given: dict[str, Any]) -> None:
    """Each profile target `chosen` is one, and each target flag given is one of theirs (each
    target checks its own values: `check_options`), before anything is read."""
    known = profile_names()
    for name in chosen:
        if name not in known:
            raise LauncherError(f"--target must be one of {', '.join(known)} (got {name!r}"
                                + (": a job's target, `launcher jobs render` writes it)"
                                   if name in names() else ")"))
    targets = profile_targets(chosen)
    mine = {dest for t in targets for dest in getattr(t, "flags", {})}
    for other in profile_targets():
        for dest, f in getattr(other, "flags", {}).items():
            if dest in given and dest not in mine:
                raise LauncherError(f"{f.opts[0]} is an option of --target {other.name} (this "
                                    f"render writes --target {', '.join(chosen)})")
    for t in targets:
        check = getattr(t, "check_options", None)
        if check is not None:
            check({d: v for d, v in given.items() if d in getattr(t, "flags", {})})


class RenderTarget(Protocol):
    name: str
    description: str
    flags: dict[str, Flag]  # its own options (dest -> Flag) of `jobs render` or `launcher
    # render` (by its kind); may be absent. A profile target may check their values before
    # anything is read: check_options(own: dict[str, Any]) -> None, and is given them in
    # ProfileRender.own.

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
