"""How many CPUs a framework's pools are sized for: min(affinity, cpuset, the quota rounded for
the framework), at least 1. The rounding is the framework's (launcher/frameworks/), passed to
the one function for the fact, `probe.cgroup.effective_cpus`, as automaxprocs passes its own."""

from __future__ import annotations

from launcher.frameworks import get as get_framework
from launcher.probe.cgroup import effective_cpus
from launcher.probe.host import HostFacts
from launcher.profiles.schema import AUTO


def cpuset_count(cpuset: str | None) -> int | None:
    from launcher.probe.cgroup import parse_cpu_list

    return parse_cpu_list(cpuset) if cpuset else None


def pool_cpus(framework: str, facts: HostFacts, cpu_limit: float | str,
              cpuset: str | None = None) -> tuple[int, str]:
    """CPUs the thread pools are sized for: min(affinity, cpuset, the quota rounded for the
    framework), at least 1. The quota is the profile's limits.cpus, else the cgroup's; the
    cpuset the cgroup's, narrowed by the profile's limits.cpuset."""
    quota = cpu_limit if cpu_limit != AUTO else facts.cgroup.cpu_quota
    rounding = rounding_for(framework)
    parts = [f"affinity {facts.affinity_cpus}"]
    sets = [n for n in (facts.cgroup.cpuset_cpus, cpuset_count(cpuset)) if n]
    if facts.cgroup.cpuset_cpus:
        parts.append(f"cpuset {facts.cgroup.cpuset_cpus}")
    if cpuset:
        parts.append(f"limits.cpuset {cpuset}")
    if quota is not None:
        src = "limits.cpus" if cpu_limit != AUTO else "quota"
        parts.append(f"{src} {float(quota):g} rounded {rounding.replace('-', ' ')}")
    why = "min of " + ", ".join(parts) if len(parts) > 1 else parts[0]
    cpus = effective_cpus(facts.affinity_cpus, min(sets) if sets else None,
                          float(quota) if quota is not None else None, rounding)
    return cpus, why


def rounding_for(framework: str) -> str:
    """How a fractional CPU quota rounds for a framework's pools. Half up where idle workers
    block soon (measured: torch at 1.5 CPUs, 1,700 matmuls/s with 2 threads against 1,380 with
    1); down where they spin (OpenBLAS: 930 against 1,330), as automaxprocs rounds."""
    return get_framework(framework).rounding
