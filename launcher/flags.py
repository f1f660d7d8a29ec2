"""A command-line flag, declared once: on the field of the request it fills (`flag(PROFILE)`),
or on a plugin (`flags` on a backend or a render target, `Command.request` of a sub-command).
cli/declare.py makes the click options from these and builds the request straight from what
was parsed; nothing else spells a flag. A leaf (standard library only), so that use cases,
jobs and third-party plugins can declare theirs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FLAG = "launcher.flag"  # the field metadata key that carries a Flag
PLUGIN_FLAGS = "launcher.plugin_flags"  # metadata: this dict field takes a registry's flags


@dataclass(frozen=True)
class Flag:
    """One option (or argument) of a command. `help` may name `${runtimes}`, `${backends}`,
    `${targets}`, `${profile_targets}` or `${frameworks}`: the registries' names, filled in when
    the command is built."""

    opts: tuple[str, ...]  # ("--profile", "-p"); () for a positional argument
    help: str = ""
    kind: str = "str"  # str | int | float | path | bool | pairs (NAME=VALUE -> dict) | ints
    metavar: str | None = None
    envvar: str | None = None
    hidden: bool = False
    minimum: float | None = None
    required: bool = False
    repeat: bool = False  # repeatable: a tuple of values
    rest: bool = False  # a positional argument taking every remaining word
    secondary: tuple[str, ...] = ()  # a bool flag's "off" spelling, e.g. ("--no-mount-cwd",)


def flag(declared: Flag, default: Any = None) -> Any:
    """A request field filled by `declared` (a dataclasses.field carrying it)."""
    if isinstance(default, (dict, list)):
        value = default
        return dataclasses.field(default_factory=lambda: type(value)(value),
                                 metadata={FLAG: declared})
    return dataclasses.field(default=default, metadata={FLAG: declared})


def plugin_flags(group: str, kind: str | None = None) -> Any:
    """A `dict[str, Any]` request field that takes the flags the entries of the entry-point
    `group` declare (their `flags`: dest -> Flag), by dest, where given; with `kind`, only
    those of the entries of that `kind` (a render target's: "profile" or "job")."""
    return dataclasses.field(default_factory=dict, metadata={PLUGIN_FLAGS: (group, kind)})


@dataclass(frozen=True)
class Declared:
    dest: str  # the request field (or the plugin's option) it fills
    flag: Flag
    default: Any  # dataclasses.MISSING where the field has none


def declared(request: type) -> Iterator[Declared]:
    """The flags of a request class, in field order."""
    for f in dataclasses.fields(request):
        if FLAG in f.metadata:
            default = f.default
            if default is dataclasses.MISSING and f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            yield Declared(f.name, f.metadata[FLAG], default)


def plugin_group(request: type) -> tuple[str, str, str | None] | None:
    """(field, entry-point group, kind) of the request's plugin-flags field, if it has one."""
    for f in dataclasses.fields(request):
        if PLUGIN_FLAGS in f.metadata:
            group, kind = f.metadata[PLUGIN_FLAGS]
            return f.name, group, kind
    return None


def argv_of(request: Any, *, skip: tuple[str, ...] = (),
            always: tuple[str, ...] = ()) -> list[str]:
    """The command-line words that give `request` back: each flag that differs from its
    default (and those in `always`), spelt as declared (a command to paste anywhere: paths
    made absolute)."""
    argv: list[str] = []
    named: list[str] = []
    for d in declared(type(request)):
        value = getattr(request, d.dest)
        if d.dest in skip or value is None or (value == d.default and d.dest not in always):
            continue
        values = _words(d.flag, value)
        if not d.flag.opts:
            named += values
        elif d.flag.kind == "bool":
            argv.append(d.flag.opts[0] if value else d.flag.secondary[0])
        else:
            for v in values:
                argv += [d.flag.opts[0], v]
    return [*named, *argv]


def _words(f: Flag, value: Any) -> list[str]:
    if f.kind == "pairs":
        return [f"{k}={v}" for k, v in dict(value).items()]
    values = list(value) if f.repeat or f.rest or f.kind == "ints" else [value]
    if f.kind == "ints" and not f.repeat:
        return [",".join(map(str, values))]
    return [str(Path(v).resolve()) if isinstance(v, Path) else str(v) for v in values]


# Flags several commands take, each declared here once.
PROFILE = Flag(("--profile", "-p"), "Profile name or path to a YAML file.")
JOB_PROFILE = Flag(("--profile", "-p"), "Profile name or path (default: the spec's `profile`).")
FRAMEWORK = Flag(("--framework", "-f"), "The framework whose threads to budget (default: the "
                 "profile's).", metavar="${frameworks}")
GPUS = Flag(("--gpus",), "all | none | N | ID,ID... (default: the profile's gpu.count).")
ENV = Flag(("--env", "-e"), "NAME=VALUE; wins over the profile. Repeatable.", kind="pairs",
           repeat=True)
PROCESSES = Flag(("--processes", "-n"), "Processes sharing the budget (default: the profile's "
                 "workers.processes).", kind="int", minimum=1)
FIT = Flag(("--fit",), "When the estimated threads exceed the pids budget, shrink the pools to "
           "the largest size that fits with headroom (CPUs for JAX, thread counts for the "
           "others) instead of refusing.", kind="bool")
HOST_ROOT = Flag(("--host-root",), "Read host facts from this tree instead of / (tests, "
                 "captured hosts).", kind="path", hidden=True, envvar="LAUNCHER_HOST_ROOT")
VISIBLE_HOST_ROOT = Flag(("--host-root",), "Read host facts from a captured tree (`doctor "
                         "--capture DIR`) instead of this host.", kind="path", metavar="DIR",
                         envvar="LAUNCHER_HOST_ROOT")
BASE_IMAGE = Flag(("--base-image",), "Base image instead of the profile's or the vendor "
                  "default.")
CA_CERT = Flag(("--ca-cert",), "Extra CA certificate (PEM) trusted by apt, pip and Python in "
               "the build.", kind="path")
TAG = Flag(("--image", "--tag", "-t"), "Image name, e.g. REGISTRY/NAME:TAG for a cloud pod to "
           "pull (default launcher/PROFILE:FRAMEWORK, a local tag).")
SPEC = Flag((), "The job spec (YAML).", kind="path", metavar="SPEC")
MAX_CONCURRENT = Flag(("--max-concurrent",), "At most this many chunks at once (a cap: the "
                      "GPUs, the memory and the pids budget still bound it).", kind="int",
                      minimum=1)
