"""CgroupFacts: the limits of the cgroup a process runs in, read through probe/cgroup.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from launcher.probe.cgroup import (
    cpu_quota_at,
    cpuset_at,
    find_chains,
    limit_dir,
    pids_binding,
    present_dir,
    read_memory,
)
from launcher.probe.mountinfo import parse_mountinfo


@dataclass
class CgroupFacts:
    version: str = "none"  # v2 | v1 | hybrid | none
    dirs: dict[str, str] = field(default_factory=dict)  # controller -> leaf dir read
    cpu_quota: float | None = None  # CPUs (quota / period), strictest ancestor
    cpuset_cpus: int | None = None
    pids_max: int | None = None
    pids_current: int | None = None
    memory_limit: int | None = None
    memory_usage: int | None = None
    oom_kills: int | None = None
    # controller (pids, memory, cpu, cpuset) -> the cgroup its limit was read from
    binding: dict[str, str] = field(default_factory=dict)

    def limited_at(self, cap: str) -> str | None:
        """Where the limit on `cap` (pids, memory, cpus, cpuset) was read, if anywhere."""
        return self.binding.get("cpu" if cap == "cpus" else cap)



def read_cgroup(root: Path) -> CgroupFacts:
    chains = find_chains(root)
    versions = {c.version for c in chains.values()}
    facts = CgroupFacts()
    facts.version = (
        "none" if not versions else versions.pop() if len(versions) == 1 else "hybrid"
    )
    if facts.version == "v1" and any(m.fstype == "cgroup2" for m in parse_mountinfo(
            root / "proc/self/mountinfo")):
        facts.version = "hybrid"
    present = {c: present_dir(ch, c) for c, ch in chains.items()}
    facts.dirs = {c: str(d) for c, d in present.items() if d is not None}
    read: dict[str, Path | None] = {}  # controller -> the cgroup a limit was read from
    if "cpu" in chains:
        facts.cpu_quota, read["cpu"] = cpu_quota_at(chains["cpu"])
    if "cpuset" in chains:
        facts.cpuset_cpus, read["cpuset"] = cpuset_at(chains["cpuset"])
    if "pids" in chains:
        facts.pids_max, facts.pids_current, where = pids_binding(chains["pids"])
        if where is not None:
            facts.binding["pids"] = str(where)
    if "memory" in chains:
        facts.memory_limit, facts.memory_usage, facts.oom_kills = read_memory(chains["memory"])
        ch = chains["memory"]
        where = limit_dir(ch, "memory.max" if ch.version == "v2" else "memory.limit_in_bytes")
        if where is not None:
            facts.binding["memory"] = str(where)
    facts.binding.update({c: str(d) for c, d in read.items() if d is not None})
    for c, d in facts.binding.items():  # a limit at a namespace's root is named too
        facts.dirs.setdefault(c, d)
    return facts
