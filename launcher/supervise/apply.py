"""Decide the environment and rlimits a workload starts with, from a caps recipe (caps.json).

The recipe holds the profile as built; `auto` values are resolved here, against the cgroup of the
container or process that is starting, through the same path as `launcher plan`.
"""

from __future__ import annotations

import json
import os
import resource
from collections.abc import Callable
from pathlib import Path
from typing import Any

from launcher.caps.model import Caps
from launcher.caps.resolve import Resolved, resolve_recipe
from launcher.probe.host import HostFacts, probe_host
from launcher.rlimits import RLIMITS
from launcher.variables import managed, managed_in


def load_recipe(path: Path) -> dict[str, Any]:
    """The profile recipe baked into the image (caps.json)."""
    return json.loads(path.read_text())["recipe"]


def explicit_names(environ: dict[str, str], base_env: dict[str, str] | None) -> set[str]:
    """Which managed variables in the environment were set on purpose (-e, a pod's env): a
    value that differs from what the base image itself set (recorded at build)."""
    base = base_env or {}
    names = managed()
    return {n for n, v in environ.items() if n in names and base.get(n) != v}


def resolve(recipe: dict[str, Any], environ: dict[str, str], facts: HostFacts | None = None,
            base_env: dict[str, str] | None = None) -> Resolved:
    facts = facts or probe_host("/", environ)
    explicit = explicit_names(environ, base_env)
    overrides = {n: environ[n] for n in explicit}
    inherited = {n: v for n, v in managed_in(environ).items() if n not in explicit}
    return resolve_recipe(recipe, facts, overrides, inherited)


def child_env(caps: Caps, environ: dict[str, str]) -> dict[str, str]:
    env = dict(environ)
    for name in caps.removed():
        env.pop(name, None)
    env.update(caps.environment())
    return env


def rlimit_triples(ulimits: dict[str, Any]) -> list[tuple[int, int, int]]:
    """(resource, soft, hard) for ulimits with `soft` and `hard` (-1 -> RLIM_INFINITY), already
    clamped to the hard limits of the process that sets them (`clamp_ulimits`)."""
    inf = resource.RLIM_INFINITY
    return [(RLIMITS[n], inf if u.soft < 0 else u.soft, inf if u.hard < 0 else u.hard)
            for n, u in ulimits.items() if n in RLIMITS]


def apply_rlimits(caps: Caps, shipped: Callable[[str], bool]) -> tuple[list[str], list[str]]:
    """Set the caps' rlimits in this process; return the warnings (a limit of the user's own
    lowered, or refused) and the notes (a shipped default lowered: nofile 1048576 on an
    ordinary host is no news at every container start)."""
    lowered = [(n, u) for n, u in caps.ulimits.items() if u.lowered]
    notes = [f"{n}: {u.source}" for n, u in lowered if shipped(f"limits.{n}")]
    warnings = [f"{n}: {u.source}" for n, u in lowered if not shipped(f"limits.{n}")]
    for res, soft, hard in rlimit_triples(caps.ulimits):
        try:
            resource.setrlimit(res, (soft, hard))
        except (ValueError, OSError) as exc:
            warnings.append(f"cannot set rlimit {res} to {soft}/{hard}: {exc}")
    return warnings, notes


def read_base_env(path: Path) -> dict[str, str] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def dump_env(path: Path) -> None:
    path.write_text(json.dumps(managed_in(dict(os.environ)), sort_keys=True))
