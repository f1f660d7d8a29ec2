"""Click commands made from declared flags (launcher/flags.py): the request's fields, the
flags of the plugins it takes (a backend's, a render target's) and the command's own output
flags (--json). What was parsed becomes the request with no copy in between: field by field,
with NAME=VALUE pairs as a dict and repeated values as a tuple."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import click

from launcher.cli.errors import run_guarded
from launcher.errors import LauncherError
from launcher.flags import Declared, Flag, declared, plugin_group
from launcher.usecases.names import plugin_flags

Handler = Callable[..., int | None]


@cache
def _names(key: str) -> str:
    """The registries' names a help text may ask for, read one registry at a time."""
    from launcher.usecases import names

    read = {"runtimes": names.runtimes, "backends": names.backends,
            "targets": names.render_targets, "profile_targets": names.profile_targets,
            "frameworks": names.frameworks}
    return ("|" if key == "frameworks" else " | ").join(read[key]())


class _Names(dict):  # type: ignore[type-arg]
    """The registries' names, read only where a text asks for one (`${frameworks}`)."""

    def __missing__(self, key: str) -> str:
        return _names(key)


def fill(text: str | None) -> str | None:
    """`text` with `${runtimes}`, `${backends}`, `${targets}`, `${profile_targets}`,
    `${frameworks}` filled in."""
    from string import Template

    return None if text is None else Template(text).safe_substitute(_Names())


def _type(f: Flag) -> Any:
    if f.kind == "int":
        return click.IntRange(min=f.minimum) if f.minimum is not None else int
    if f.kind == "float":
        return click.FloatRange(min=f.minimum) if f.minimum is not None else float
    if f.kind == "path":
        return click.Path(path_type=Path)
    return str  # pairs and ints are parsed into the request (value_of), mistakes exit 1


def param(d: Declared) -> click.Parameter:
    """The click parameter of one declared flag."""
    f = d.flag
    default = None if d.default is dataclasses.MISSING else d.default
    if not f.opts:
        return click.Argument([d.dest], type=_type(f), metavar=fill(f.metavar),
                              nargs=-1 if f.rest or f.repeat else 1,
                              required=d.default is dataclasses.MISSING and not f.rest,
                              default=default if not (f.rest or f.repeat) else None)
    if f.kind == "bool":
        opts = [f"{f.opts[0]}/{f.secondary[0]}", *f.opts[1:]] if f.secondary else [*f.opts]
        return click.Option([*opts, d.dest], is_flag=True, default=bool(default),
                            help=fill(f.help), hidden=f.hidden, envvar=f.envvar,
                            show_default=False)
    if f.repeat or f.kind == "pairs":
        default = None
    return click.Option([*f.opts, d.dest], type=_type(f), multiple=f.repeat,
                        default=default, help=fill(f.help), metavar=fill(f.metavar),
                        envvar=f.envvar, hidden=f.hidden,
                        required=f.required or d.default is dataclasses.MISSING,
                        show_default=default not in (None, (), False))


def value_of(d: Declared, raw: Any) -> Any:
    """What the request's field takes from click's value."""
    if d.flag.kind == "pairs":
        return _pairs(d.flag.opts[0], raw or ())
    if d.flag.kind == "ints" and raw is not None:
        return _ints(d.flag.opts[0], raw)
    if d.flag.repeat or d.flag.rest:
        return tuple(raw or ())
    if raw is None and d.default is not dataclasses.MISSING:
        return d.default
    return raw


def _pairs(spelling: str, pairs: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name or not name.replace("_", "a").isalnum() or name[0].isdigit():
            raise LauncherError(f"{spelling}: expected NAME=VALUE (got {pair!r})")
        out[name] = value
    return out


def _ints(spelling: str, text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise LauncherError(f"{spelling}: expected whole numbers such as 500,1000,2000 "
                            f"(got {text!r})") from None


def _plugin_params(group: str, kind: str | None) -> list[tuple[Declared, click.Parameter]]:
    """The flags the entries of `group` (of `kind`) declare, as parameters marked with their
    owner."""
    out = []
    for owner, dest, f in plugin_flags(group, kind):
        d = Declared(dest, f, None)
        p = param(d)
        if isinstance(p, click.Option) and p.help is not None:
            p.help = f"({owner}) {p.help}"
        out.append((d, p))
    return out


def command(name: str, request: type | None, handler: Handler, *, help: str,
            own: tuple[Declared, ...] = (), short: str | None = None,
            cls: type[click.Command] = click.Command,
            settings: dict[str, Any] | None = None) -> click.Command:
    """A click command whose parameters are `request`'s flags, the flags the plugins of its
    plugin-flags field declare (read when the command parses or shows its help, so a plugin
    installed later is there), then `own` (the command's output flags). `handler` gets the
    request (if any) and `own`'s values by dest; its return value is the exit status."""
    fields = list(declared(request)) if request is not None else []
    bag = plugin_group(request) if request is not None else None

    class Declaring(cls):  # type: ignore[valid-type,misc]
        plugins_seen: tuple[str, ...] | None = None

        def get_params(self, ctx: click.Context) -> list[click.Parameter]:
            """The parameters, with the plugins' flags as installed now (kept while the
            same plugins are: click compares parameters by identity)."""
            if bag:
                now = _plugin_params(*bag[1:])
                seen = tuple(d.dest for d, _ in now)
                if seen != self.plugins_seen:
                    self.plugins_seen = seen
                    self.params = [*self._head, *(p for _, p in now), *self._tail]
            return super().get_params(ctx)  # type: ignore[no-any-return]

    def callback(**given: Any) -> None:
        def go() -> int | None:  # a value's mistake is one line and status 1, as the rest
            extra = {d.dest: value_of(d, given[d.dest]) for d in own}
            if request is None:
                return handler(**extra)
            kwargs = {d.dest: value_of(d, given[d.dest]) for d in fields}
            if bag:
                kwargs[bag[0]] = {d.dest: value_of(d, given[d.dest])
                                  for d, _ in _plugin_params(*bag[1:])
                                  if given.get(d.dest) not in (None, False, ())}
            return handler(request(**kwargs), **extra)

        code = run_guarded(go)
        if code:
            raise click.exceptions.Exit(code)

    head, tail = [param(d) for d in fields], [param(d) for d in own]
    made = Declaring(name, params=[*head, *tail], callback=callback, help=fill(help),
                     short_help=short, context_settings={"help_option_names": ["-h", "--help"],
                                                         **(settings or {})})
    made._head, made._tail = head, tail
    return made


JSON = Declared("as_json", Flag(("--json",), "Machine-readable output.", kind="bool"), False)
DETAILED = Declared("detailed", Flag(
    ("--detailed-exitcode",), "Exit with the verdict, for scripts (as terraform's): 0 ok, "
    "4 warn, 5 refuse; 1 stays a mistake, 2 a usage error.", kind="bool"), False)
