"""The supervisor's first stage: the workload's environment and cgroups, or why it must not
start (a typed refusal). Where launcher resolved the caps (`launcher run`, a chunk), they are
taken as given; in an image started by docker, compose or a cloud they are resolved here,
against the container's own cgroup."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from launcher import contract as c


class Prepared:  # (plain classes: dataclasses costs ~8 ms of every container start)
    def __init__(self, env: dict[str, str], cgroups: list[str] | None = None, undo: str = "",
                 recipe: Any = None) -> None:
        self.env = env  # the workload's
        self.cgroups = cgroups or []  # the entrypoint's own, for the workload
        self.undo = undo  # leaf moves to undo at the end (contract.encode_undo)
        self.recipe = recipe  # the resolved recipe (its profile's growth keys: the watch's)


class Refused:
    def __init__(self, status: int, words: str) -> None:
        self.status, self.words = status, words


def prepare(environ: dict[str, str], say: Callable[[str], None]) -> Prepared | Refused:
    if environ.get(c.RESOLVED) == "1":
        return Prepared(resolved_env(environ))
    return resolve_here(environ, say)


def resolved_env(environ: dict[str, str]) -> dict[str, str]:
    """`launcher run` resolved the caps and set the limits: its environment as given, less
    the stale variables it names and launcher's own."""
    env = dict(environ)
    for name in c.decode_names(env.get(c.REMOVE, "")) + list(c.PRIVATE):
        env.pop(name, None)
    return env


def resolve_here(environ: dict[str, str], say: Callable[[str], None]) -> Prepared | Refused:
    """The caps resolved against this container's cgroup, the limits set; refused where the
    profile says so (`limits.require`, a refusal not overridden)."""
    import dataclasses

    from launcher.caps.fit import apply as apply_fit
    from launcher.caps.fit import fit_to_budget
    from launcher.errors import LauncherError
    from launcher.supervise.apply import (
        apply_rlimits,
        child_env,
        load_recipe,
        read_base_env,
        resolve,
    )
    from launcher.supervise.enforce import enforce
    from launcher.supervise.report import report

    caps_file = Path(environ.get(c.CAPS, c.CAPS_FILE))
    quiet = c.flag(environ, c.QUIET)
    try:
        r = resolve(load_recipe(caps_file), dict(environ),
                    base_env=read_base_env(Path(c.BASE_ENV_FILE)))
    except (OSError, ValueError, LauncherError) as exc:
        return Refused(1, f"error: cannot apply the caps from {caps_file}: {exc}")
    entry = enforce(r.caps, r.facts.cgroup)
    if entry.advisory and r.profile.get("limits.require"):
        entry.release()
        return Refused(1, f"refused (limits.require): {entry.shortfall()} cannot be enforced "
                          f"here; not started")
    r = dataclasses.replace(r, caps=entry.mark_budget(r.caps))
    if r.caps.verdict.level == "refuse" and r.profile.get("limits.fit"):
        fit = fit_to_budget(r)
        if fit is not None:
            r = apply_fit(r, fit, "limits.fit")
            say(f"limits.fit: {fit.describe()}")
    override = "limits.override" if r.profile.get("limits.override") else None
    report(r.caps, quiet, say, overridden_by=override)
    for line in entry.lines() if not quiet else ():
        say(line)
    if entry.advisory:
        say(f"warning: advisory only: {entry.shortfall()} cannot be enforced here")
    if r.caps.verdict.level == "refuse" and not override:
        entry.release()
        hint = "" if r.profile.get("limits.fit") else (
            "; `limits: {fit: true}` in the profile shrinks the pools instead")
        return Refused(1, f"refused: not started{hint}")
    warnings, notes = apply_rlimits(r.caps, r.profile.from_shipped)
    for line in warnings:
        say(f"warning: {line}")
    for line in notes if c.flag(environ, c.VERBOSE) else ():
        say(line)
    cgroups = sorted({str(d) for d in entry.cgroup.dirs.values()}) if entry.cgroup else []
    undo = c.encode_undo(entry.cgroup.undo) if entry.cgroup is not None and \
        entry.cgroup.undo else ""
    return Prepared(child_env(r.caps, dict(os.environ)), cgroups, undo, r)
