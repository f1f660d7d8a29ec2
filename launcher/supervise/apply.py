"""Decide the environment and rlimits a workload starts with, from a caps recipe (caps.json).

The recipe holds the profile as built; `auto` values are resolved here, against the cgroup of the
container or process that is starting.
"""

from __future__ import annotations

import json
import os
import resource
from pathlib import Path
from typing import Any

from launcher.caps.plan import Caps, compute_caps
from launcher.caps.variables import MANAGED
from launcher.probe.host import HostFacts, probe_host
from launcher.profiles.loader import Profile

RLIMITS = {
    "nproc": resource.RLIMIT_NPROC,
    "nofile": resource.RLIMIT_NOFILE,
    "stack": resource.RLIMIT_STACK,
    "memlock": resource.RLIMIT_MEMLOCK,
}


def recipe_from(profile: Profile, framework: str, processes: int | None,
                overrides: dict[str, str]) -> dict[str, Any]:
    """What goes into caps.json: enough to recompute the caps at start."""
    from launcher.profiles.loader import display_path

    return {
        "profile": {"name": profile.name, "path": display_path(profile.path),
                    "data": profile.data,
                    "origin": profile.origin, "chain": profile.chain},
        "framework": framework,
        "processes": processes,
        "overrides": overrides,
    }


def load_recipe(path: Path) -> dict[str, Any]:
    """The profile recipe baked into the image (caps.json)."""
    return json.loads(path.read_text())["recipe"]


def profile_of(recipe: dict[str, Any]) -> Profile:
    p = recipe["profile"]
    return Profile(p["name"], Path(p["path"]), p["data"], p["origin"], p["chain"])


def explicit_names(environ: dict[str, str], base_env: dict[str, str] | None) -> set[str]:
    """Which managed variables in the environment were set on purpose (-e, a pod's env): a
    value that differs from what the base image itself set (recorded at build)."""
    base = base_env or {}
    return {n for n, v in environ.items() if n in MANAGED and base.get(n) != v}


def resolve(recipe: dict[str, Any], environ: dict[str, str], facts: HostFacts | None = None,
            base_env: dict[str, str] | None = None) -> Caps:
    facts = facts or probe_host("/", environ)
    explicit = explicit_names(environ, base_env)
    overrides = {**recipe.get("overrides", {}),
                 **{n: environ[n] for n in explicit if n in environ}}
    inherited = {n: v for n, v in environ.items() if n in MANAGED and n not in explicit}
    return compute_caps(profile_of(recipe), facts, recipe.get("framework"),
                        recipe.get("processes"), overrides, inherited)


def child_env(caps: Caps, environ: dict[str, str]) -> dict[str, str]:
    env = dict(environ)
    for name in caps.removed():
        env.pop(name, None)
    env.update(caps.environment())
    return env


def apply_rlimits(caps: Caps) -> list[str]:
    """Set soft limits (never above the hard limit); return notes on what could not be set."""
    notes = []
    for name, u in caps.ulimits.items():
        res = RLIMITS.get(name)
        if res is None:
            continue
        soft, hard = resource.getrlimit(res)
        want = resource.RLIM_INFINITY if u.soft < 0 else u.soft
        if hard != resource.RLIM_INFINITY and (want == resource.RLIM_INFINITY or want > hard):
            notes.append(f"{name} soft limit {u.soft} is above the hard limit {hard}; using {hard}")
            want = hard
        if want != soft:
            try:
                resource.setrlimit(res, (want, hard))
            except (ValueError, OSError) as exc:
                notes.append(f"cannot set {name} to {want}: {exc}")
    return notes


def read_base_env(path: Path) -> dict[str, str] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def managed_snapshot(environ: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in environ.items() if k in MANAGED}


def dump_env(path: Path) -> None:
    path.write_text(json.dumps(managed_snapshot(dict(os.environ)), sort_keys=True))
