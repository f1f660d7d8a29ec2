"""The one path from a profile to caps, for plan, doctor, run, render, build, jobs and the
supervisor inside an image: GPUs selected, the profile narrowed to them, caps computed."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launcher.caps.clamp import clamp_ulimits
from launcher.caps.compute import compute_caps
from launcher.caps.gpus import select_gpus, with_gpus
from launcher.caps.model import Caps
from launcher.defaults import NONE
from launcher.errors import LauncherError
from launcher.frameworks import get as get_framework
from launcher.frameworks import names as framework_names
from launcher.frameworks.base import NOT_HERE, Installed
from launcher.probe.host import HostFacts
from launcher.profiles.loader import Profile, display_path
from launcher.vendors.base import GpuSelection


@dataclass
class Resolved:
    profile: Profile  # with the GPU selection applied
    facts: HostFacts
    selection: GpuSelection
    framework: str
    processes: int | None
    overrides: dict[str, str]
    caps: Caps
    inputs: dict[str, Any] = field(default_factory=dict)  # the rest of compute_caps's inputs
    clamp: bool = False  # ulimits and memory lowered to this host's

    def with_values(self, values: dict[str, Any], origin: str) -> Resolved:
        """The same resolution with profile keys set (`threads.intra_op`: 4), each recorded
        as coming from `origin`."""
        data = copy.deepcopy(self.profile.data)
        for dotted, value in values.items():
            node = data
            *parents, leaf = dotted.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value
        prof = dataclasses.replace(self.profile, data=data, origin={
            **self.profile.origin, **{k: origin for k in values}})
        caps = compute_caps(prof, self.facts, framework=self.framework,
                            processes=self.processes, overrides=self.overrides,
                            selection=self.selection, clamp=self.clamp, **self.inputs)
        if self.clamp:
            clamp_ulimits(caps, self.facts)
        return dataclasses.replace(self, profile=prof, caps=caps)

    def recipe(self) -> dict[str, Any]:
        """What goes into caps.json: enough to recompute the caps where the image starts."""
        p = self.profile
        return {
            "profile": {"name": p.name, "path": display_path(p.path), "data": p.data,
                        "origin": p.origin, "chain": p.chain, "shipped": p.shipped},
            "framework": self.framework,
            "processes": self.processes,
            "overrides": self.overrides,
        }


def resolve(profile: Profile, facts: HostFacts, *, framework: str | None = None,
            processes: int | None = None, overrides: dict[str, str] | None = None,
            gpus: str | None = None, inherited: dict[str, str] | None = None,
            for_this_host: bool = True, clamp: bool = False,
            extra_threads: int = 0, gpus_per_process: int | None = None) -> Resolved:
    """`for_this_host` False: the target is another machine (render, build), so its GPUs are
    taken from the profile. `clamp`: the limits will be set on this host (run, supervisor),
    so the ulimits are lowered to its hard limits and the memory limit to its memory."""
    if framework is not None and framework not in framework_names():
        raise LauncherError(f"--framework must be one of {', '.join(framework_names())} "
                            f"(got {framework!r})")
    selection = select_gpus(profile, facts, gpus, for_this_host)
    narrowed = with_gpus(profile, selection)
    fw = framework or narrowed.get("framework", NONE)
    overrides = dict(overrides or {})
    inputs = {"inherited": inherited or {}, "extra_threads": extra_threads,
              "gpus_per_process": gpus_per_process, "installed": installed_here(fw, facts)}
    caps = compute_caps(narrowed, facts, framework=fw, processes=processes, overrides=overrides,
                        selection=selection, clamp=clamp, **inputs)
    if clamp:
        clamp_ulimits(caps, facts)
    return Resolved(narrowed, facts, selection, fw, processes, overrides, caps, inputs, clamp)


def installed_here(framework: str, facts: HostFacts) -> Installed:
    """The framework's version and build where the workload runs, when that is this
    interpreter's environment (a live host); unknown under a fixture root."""
    return get_framework(framework).installed() if str(facts.root) == "/" else NOT_HERE


def profile_of(recipe: dict[str, Any]) -> Profile:
    p = recipe["profile"]
    return Profile(p["name"], Path(p["path"]), p["data"], p["origin"], p["chain"],
                   shipped=p.get("shipped", []))


def resolve_recipe(recipe: dict[str, Any], facts: HostFacts, overrides: dict[str, str],
                   inherited: dict[str, str]) -> Resolved:
    """caps.json's recipe resolved where the image starts, against its own cgroup."""
    return resolve(profile_of(recipe), facts, framework=recipe.get("framework"),
                   processes=recipe.get("processes"),
                   overrides={**recipe.get("overrides", {}), **overrides}, inherited=inherited,
                   clamp=True)
