"""Copy the files the probe reads into a tree, for bug reports and test fixtures.

`launcher doctor --capture DIR` (or `python3 -m launcher.probe --capture DIR` inside an image).
"""

from __future__ import annotations

from pathlib import Path

from launcher.probe.cgroup import find_chains

_FILES = [
    "proc/self/cgroup", "proc/self/mountinfo", "proc/self/status", "proc/self/limits",
    "proc/self/uid_map", "proc/loadavg",
    "proc/meminfo", "proc/sys/kernel/threads-max", "proc/sys/kernel/pid_max",
    "proc/sys/vm/max_map_count", "sys/devices/system/cpu/online", "etc/group",
]
_CGROUP_FILES = [
    "cgroup.controllers", "cpu.max", "cpu.cfs_quota_us", "cpu.cfs_period_us",
    "cpuset.cpus", "cpuset.cpus.effective", "cpuset.effective_cpus", "pids.max", "pids.current",
    "memory.max", "memory.current", "memory.events", "memory.limit_in_bytes",
    "memory.usage_in_bytes", "memory.oom_control",
]


def capture(dest: Path, root: Path = Path("/")) -> list[str]:
    """Copy what the probe reads under `root` into `dest`; return the relative paths copied."""
    copied: list[str] = []

    def take(rel: str) -> None:
        src = root / rel
        try:
            data = src.read_bytes()
        except OSError:
            return
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
        copied.append(rel)

    for rel in _FILES:
        take(rel)
    proc = root / "proc"
    if proc.is_dir():  # every process's status: the UID task count (RLIMIT_NPROC) survives
        for d in proc.iterdir():
            if d.name.isdigit():
                take(f"proc/{d.name}/status")
    for chain in find_chains(root).values():
        for d in chain.dirs:
            rel_dir = d.relative_to(root)
            (dest / rel_dir).mkdir(parents=True, exist_ok=True)
            for name in _CGROUP_FILES:
                take(str(rel_dir / name))
    return copied
