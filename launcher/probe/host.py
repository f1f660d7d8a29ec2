"""HostFacts: everything the caps need to know about where a workload will run."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from launcher.errors import HostError
from launcher.kernel import read_nproc_exempt
from launcher.probe.calibration import read_calibration
from launcher.probe.cgroup import effective_cpus, parse_cpu_list
from launcher.probe.cgroup_facts import CgroupFacts, read_cgroup
from launcher.probe.gpus import read_gpus, read_groups
from launcher.probe.limits import (
    Rlimit,
    read_affinity_list,
    read_meminfo,
    read_rlimits,
    read_sysctl,
    read_tasks,
    read_uid_tasks,
)
from launcher.variables import managed_in
from launcher.vendors import all_vendors
from launcher.vendors.base import Gpu, HostGpus


@dataclass
class HostFacts:
    root: str
    online_cpus: int
    affinity_cpus: int
    effective_cpus: int  # whole CPUs: min(affinity, cpuset, quota rounded down)
    cgroup: CgroupFacts
    rlimits: dict[str, Rlimit]
    uid: int | None
    uid_tasks: int | None  # None: not counted, RLIMIT_NPROC does not bind (nproc_exempt)
    threads_max: int | None
    pid_max: int | None
    max_map_count: int | None
    mem_total: int | None
    mem_available: int | None
    gpus: list[Gpu]
    groups: dict[str, int] = field(default_factory=dict)  # GPU groups (video, render) -> GID
    env: dict[str, str] = field(default_factory=dict)  # managed variables already set
    calibration: list[dict[str, Any]] = field(default_factory=list)  # `launcher calibrate`
    affinity_list: str | None = None  # the CPUs themselves, e.g. 0-3
    nproc_exempt: bool = False  # RLIMIT_NPROC does not bind (root of the initial namespace)
    tasks: int | None = None  # every task the kernel runs (/proc/loadavg), threads included

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def host_memory(self) -> int | None:
        """The memory a workload may use: the cgroup limit, else the host's RAM."""
        return self.cgroup.memory_limit or self.mem_total

    def host_path(self, path: str) -> str:
        """A path read under `root`, as the host itself names it (a fixture root dropped)."""
        if self.root not in ("", "/") and path.startswith(self.root):
            return "/" + path[len(self.root):].lstrip("/")
        return path

    def host_gpus(self) -> HostGpus:
        return HostGpus(tuple(self.gpus), dict(self.groups))


def _online_cpus(root: Path) -> int:
    path = root / "sys/devices/system/cpu/online"
    text = path.read_text().strip() if path.is_file() else ""  # no walrus: 3.7 imports this
    if text:
        return parse_cpu_list(text, path)
    return (os.cpu_count() or 1) if str(root) == "/" else 1


def probe_host(root: Path | str = "/", environ: dict[str, str] | None = None) -> HostFacts:
    """Read every fact from under `root` (`/` live; a fixture tree in tests)."""
    root = Path(root)
    if not root.is_dir():
        raise HostError(f"{root}: no such folder to read host facts from")
    live = str(root) == "/"
    cg = read_cgroup(root)
    online = _online_cpus(root)
    affinity_list = read_affinity_list(root)
    affinity = parse_cpu_list(affinity_list) if affinity_list else online
    meminfo = read_meminfo(root)
    exempt = read_nproc_exempt(root)
    # every /proc/PID/status read: thousands on a busy server, for a limit that binds not root
    uid, tasks = read_uid_tasks(root, count=not exempt)
    groups = {g for v in all_vendors() for g in v.host_groups}
    return HostFacts(
        root=str(root),
        online_cpus=online,
        affinity_cpus=affinity,
        effective_cpus=effective_cpus(affinity, cg.cpuset_cpus, cg.cpu_quota),
        cgroup=cg,
        rlimits=read_rlimits(root),
        uid=uid,
        uid_tasks=tasks,
        threads_max=read_sysctl(root, "kernel.threads-max"),
        pid_max=read_sysctl(root, "kernel.pid_max"),
        max_map_count=read_sysctl(root, "vm.max_map_count"),
        mem_total=meminfo.get("MemTotal"),
        mem_available=meminfo.get("MemAvailable"),
        gpus=read_gpus(root, use_tools=live),
        groups=read_groups(root, groups),
        env=managed_in(dict(os.environ if environ is None else environ)),
        calibration=read_calibration(root),
        affinity_list=affinity_list,
        nproc_exempt=exempt,
        tasks=read_tasks(root),
    )
