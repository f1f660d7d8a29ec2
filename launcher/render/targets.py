"""Where a job can be rendered, as a registry (entry-point group `launcher.render_targets`):
`k8s` (a Kubernetes Indexed Job). A target is an object with a `name`, a `description`, a
`check` of the options before anything is read, and a `render` that returns files; a new one
(Slurm) is one module and one entry-point line, and `launcher jobs render --target` lists it."""

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


def get(name: str) -> RenderTarget:
    try:
        return _registry.get(name)
    except UnknownEntry:
        raise LauncherError(f"--target must be one of {', '.join(names())} "
                            f"(got {name!r})") from None
