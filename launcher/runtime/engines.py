"""Engines as a registry (entry-point group `launcher.engines`): name -> "module:Class", loaded
only when used (the Docker engine's import must not slow `launcher --help`). A new engine is one
module and one entry-point line; what it can do is on its class (`can_build`,
`runs_host_processes`, `auto_rank`), never its name tested here."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from launcher.defaults import AUTO
from launcher.errors import LauncherError
from launcher.registry import Registry

if TYPE_CHECKING:  # not at import: `launcher --help` lists the names without loading engines
    from launcher.runtime.engine import Engine, Leftover

_registry: Registry[type[Engine]] = Registry("runtime", group="launcher.engines",
                                             default="Engine")


def names() -> tuple[str, ...]:
    return _registry.names()


def auto_order() -> list[str]:
    """`--runtime auto`: the engines with an `auto_rank`, lowest first."""
    ranked = [(_registry.get(n).auto_rank, n) for n in names()]
    return [n for rank, n in sorted((r, n) for r, n in ranked if r is not None)]


def get_engine(name: str) -> Engine:
    if name not in _registry:
        raise LauncherError(f"--runtime must be one of auto, {', '.join(_registry.names())} "
                            f"(got {name!r})")
    return _registry.get(name)()


def first_that(capability: str) -> Engine:
    """The first engine, in registry order, with a capability (`can_build`,
    `runs_host_processes`): no caller names an engine."""
    for name in names():
        cls = _registry.get(name)
        if getattr(cls, capability, False):
            return cls()
    raise LauncherError(f"no runtime can do this: none has {capability}")


def sweep_leftovers(engine: Engine, *, everything: bool) -> list[tuple[Leftover, str]]:
    """What killed runs left, each with its state: removed (with `everything`, or when it
    holds nothing: a container never started, an empty run cgroup), else left behind (or why
    it could not be removed)."""
    out = []
    for item in engine.leftovers():
        state = "left behind"
        if everything or item.idle:
            try:
                engine.remove(item)
                state = "removed"
            except LauncherError as exc:
                state = f"left behind: {exc}" if everything else state
        out.append((item, state))
    return out


def tidy_leftovers(engine: Engine) -> tuple[int, list[str]]:
    """Remove the leftovers that hold nothing; return how many, and a line for each of the
    rest."""
    swept = sweep_leftovers(engine, everything=False)
    return (sum(state == "removed" for _, state in swept),
            [f"{i.kind} {i.ident} ({i.detail})" for i, state in swept if state != "removed"])


class Chosen(NamedTuple):
    engine: Engine
    note: str | None  # why `auto` passed over the engines before it
    lacked_image: bool = False  # one it passed answers but has no image: worth a warning


def choose_engine(runtime: str, image: str | None, check_image: bool = True) -> Chosen:
    """The engine for `--runtime`; for `auto`, the first of auto_order() that answers (and has
    the image, unless `check_image` is False), with a note saying why others were passed."""
    if runtime != AUTO:
        return Chosen(get_engine(runtime), None)
    passed, lacked = [], False
    for name in auto_order():
        engine = get_engine(name)
        if check_image and engine.image_exists(image):
            return Chosen(engine, f"{'; '.join(passed)}; using the {name} runtime"
                          if passed else None, lacked)
        if not engine.available():
            passed.append(f"no {name} engine answers")
        elif check_image:
            passed.append(f"no image {image} for {name} (build one with `launcher build`)")
            lacked = True
        else:
            return Chosen(engine, f"{'; '.join(passed)}; using the {name} runtime"
                          if passed else None, lacked)
    raise LauncherError("no runtime can run this: " + "; ".join(passed))
