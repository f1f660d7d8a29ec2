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


def plugin_flags(group: str) -> list[tuple[str, str, Flag]]:
    """(entry, dest, flag) for every flag the entries of entry-point `group` declare (their
    `flags`: dest -> Flag); their modules are imported."""
    registry: Registry[Any] = Registry(group, group=group, default="")
    return [(name, dest, f) for name in registry.names()
            for dest, f in getattr(registry.get(name), "flags", {}).items()]
