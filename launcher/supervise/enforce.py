"""The entrypoint enforces what the engine did not: an image started by plain `docker run`, a
pod (RunPod, Vast, Kubernetes) takes no launcher flags, so a pids, memory or CPU limit its
profile asks for may be missing from the container's cgroup. The supervisor then places the
workload in a cgroup of its own by the same rule and code as a native run
(cgroups/run_cgroup.py: alone in its cgroup namespace on v2 it moves into a leaf and enables
the controllers). Where it cannot, the limit is advisory, said with why, and never claimed as
the budget; `limits.require: true` in the profile refuses instead."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path

from launcher.caps.model import Bound, Caps
from launcher.cgroups.advisory import swap_fix
from launcher.cgroups.placement import FIX
from launcher.cgroups.run_cgroup import RunCgroup, make_run_cgroup
from launcher.probe.cgroup_facts import CgroupFacts
from launcher.units import format_size

# inside a container the fix is the engine's flag, or a v2 host (a namespace of its own)
CONTAINER_FIX = ("fix: give the container the limit (docker run --pids-limit/--memory/--cpus, "
                 "compose pids_limit/mem_limit/cpus) or run it on a cgroup v2 host, where the "
                 "entrypoint makes its own cgroup")


@dataclass
class Entry:
    """What the entrypoint did about the limits the profile asks for."""

    cgroup: RunCgroup | None = None  # the workload's own cgroup, when one was made
    already: dict[str, str] = field(default_factory=dict)  # cap -> the container's own limit
    advisory: dict[str, str] = field(default_factory=dict)  # cap -> why it is not enforced

    def lines(self) -> list[str]:
        out = [f"{cap} {how}: enforced by the container's cgroup"
               for cap, how in self.already.items()]
        if self.cgroup is not None:
            out += [f"{cap} {how}: enforced by a cgroup the entrypoint made"
                    for cap, how in self.cgroup.enforced.items()]
            out += self.cgroup.notes
        return out

    def release(self) -> None:
        """Nothing will run: the cgroup made for it goes, the caller's cgroup as it was."""
        if self.cgroup is not None:
            self.cgroup.cleanup()

    def mark_budget(self, caps: Caps) -> Caps:
        """A budget never names a limit that is not enforced: the caps, saying so where it
        does (a new value; `caps` unchanged)."""
        budget = caps.budget
        if "pids" not in self.advisory or budget.bound_by is not Bound.PIDS_LIMIT:
            return caps
        marked = dataclasses.replace(budget, binding=f"{budget.binding}, advisory: not "
                                                     f"enforced here")
        return dataclasses.replace(caps, budget=marked)

    def shortfall(self) -> str:
        return ", ".join(f"the {cap} limit ({why})" for cap, why in self.advisory.items())


def asked(caps: Caps) -> dict[str, float]:
    """The pids, memory and CPU limits the profile asks for (auto ones are the cgroup's)."""
    return {cap: float(caps.limits[cap].value) for cap in ("pids", "memory", "cpus")
            if cap in caps.limits and caps.limits[cap].value}


def held(cg: CgroupFacts, cap: str, value: float) -> str | None:
    """The container's own limit for `cap` when it is at or below `value`, in words."""
    limit = {"pids": cg.pids_max, "memory": cg.memory_limit, "cpus": cg.cpu_quota}[cap]
    if limit is None or limit > value:
        return None
    where = cg.limited_at(cap)
    shown = format_size(int(limit)) if cap == "memory" else f"{limit:g}"  # 256MiB, not 2.7e+08
    return shown + (f" (at {where})" if where else "")


def enforce(caps: Caps, cg: CgroupFacts, root: Path = Path("/")) -> Entry:
    """Make the workload's cgroup for each asked limit the container does not hold already."""
    entry = Entry()
    missing: dict[str, float] = {}
    for cap, value in asked(caps).items():
        how = held(cg, cap, value)
        if how is None:
            missing[cap] = value
        else:
            entry.already[cap] = how
    if not missing:
        return entry
    rc = make_run_cgroup(f"launcher-{os.getpid()}-workload",
                         pids=int(missing["pids"]) if "pids" in missing else None,
                         memory=int(missing["memory"]) if "memory" in missing else None,
                         cpus=missing.get("cpus"), root=root)
    entry.cgroup = rc
    # the host's fix (a cgroup of launcher's own) is the engine's flag in a container
    entry.advisory = {cap: swap_fix(a, FIX, CONTAINER_FIX) for cap, a in rc.advisory.items()}
    return entry
