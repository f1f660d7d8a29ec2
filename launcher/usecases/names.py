"""The names of the registries' entries, for the command line's help and checks: read from the
entry points' metadata, nothing imported (`launcher --help` loads no engine, backend or
render target)."""

from __future__ import annotations

from launcher.registry import Registry


def runtimes() -> tuple[str, ...]:
    from launcher.runtime.engines import names

    return names()


def frameworks() -> tuple[str, ...]:
    from launcher.frameworks import names

    return names()


def backends() -> tuple[str, ...]:
    """Where a job's chunks run: launcher/jobs/backends.py's group, read here without importing
    that module (it imports the job machinery)."""
    return Registry("backend", group="launcher.backends", default="Backend").names()


def render_targets() -> tuple[str, ...]:
    from launcher.render.targets import names

    return names()
