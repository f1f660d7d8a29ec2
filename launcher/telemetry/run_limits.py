"""The limits a running workload is under, read from its own cgroup on this host."""

from __future__ import annotations

from pathlib import Path

from launcher.probe.cgroup import find_chains, read_memory, read_pids
from launcher.probe.host import HostFacts


def limits_of(pid: int, facts: HostFacts) -> tuple[dict[str, int | None], Path | None]:
    """({pids_max, max_map_count, memory_limit_bytes}, the pids cgroup dir) for `pid`."""
    limits: dict[str, int | None] = {"pids_max": None, "max_map_count": facts.max_map_count,
                                     "memory_limit_bytes": None}
    pids_dir = None
    try:
        chains = find_chains(Path("/"), str(pid))
        if "pids" in chains:
            pids_dir = chains["pids"].dirs[0]
            limits["pids_max"] = read_pids(chains["pids"])[0]
        if "memory" in chains:
            limits["memory_limit_bytes"] = read_memory(chains["memory"])[0]
    except Exception:  # noqa: BLE001 - telemetry works with fewer limits rather than fail
        pass
    if limits["memory_limit_bytes"] is None:
        limits["memory_limit_bytes"] = facts.mem_total
    return limits, pids_dir


def memory_dir_of(pid: int) -> tuple[Path | None, bool]:
    """(the nearest memory cgroup of `pid`, whether it is v2): where the kernel charges and
    peaks the run's memory (the caller says whether that cgroup is the run's own)."""
    try:
        chains = find_chains(Path("/"), str(pid))
    except Exception:  # noqa: BLE001 - no cgroup readable: no kernel figures
        return None, False
    chain = chains.get("memory")
    if chain is None or not chain.dirs:
        return None, False
    return chain.dirs[0], chain.version == "v2"
