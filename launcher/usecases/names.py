"""The names of the registries' entries, for the command line's help and checks: read from the
entry points' metadata, nothing imported (`launcher --help` loads no engine, backend or
render target)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from launcher.registry import Registry

if TYPE_CHECKING:
    from launcher.commands import Command
    from launcher.flags import Flag


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
    """The targets `jobs render --target` takes."""
    from launcher.render.targets import job_names

    return job_names()


def profile_targets() -> tuple[str, ...]:
    """The targets `launcher render --target` takes."""
    from launcher.render.targets import profile_names

    return profile_names()


COMMANDS = Registry("command", group="launcher.commands", default="COMMAND")


def plugin_commands() -> tuple[str, ...]:
    """The plugins' sub-commands, by place (`jobs.ray-node`), from metadata alone."""
    return COMMANDS.names()


def plugin_command(entry: str) -> Command:
    return COMMANDS.get(entry)  # type: ignore[no-any-return]


def plugin_command_help(entry: str) -> str:
    """The first line of a plugin command's help (its module is imported)."""
    text = plugin_command(entry).help.strip()
    return text.splitlines()[0] if text else ""


def plugin_flags(group: str, kind: str | None = None) -> list[tuple[str, str, Flag]]:
    """(entry, dest, flag) for every flag the entries of entry-point `group` declare (their
    `flags`: dest -> Flag), with `kind` only those of the entries of that kind (an entry that
    names none is a job's: render targets' rule); their modules are imported."""
    registry: Registry[Any] = Registry(group, group=group, default="")
    entries = [(name, registry.get(name)) for name in registry.names()]
    return [(name, dest, f) for name, entry in entries
            if kind is None or str(getattr(entry, "kind", "job")) == kind
            for dest, f in getattr(entry, "flags", {}).items()]
