"""CgroupFacts: the limits of the cgroup a process runs in, read through probe/cgroup.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from launcher.probe.cgroup import (
    find_chains,
    limit_dir,
    pids_binding,
    present_dir,
    read_cpu_quota,
    read_cpuset,
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
    binding: dict[str, str] = field(default_factory=dict)  # pids | memory -> the dir that limits



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
    if "cpu" in chains:
        facts.cpu_quota = read_cpu_quota(chains["cpu"])
    if "cpuset" in chains:
        facts.cpuset_cpus = read_cpuset(chains["cpuset"])
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
    return facts
