"""What the workload may use: the tasks the smallest pids-like limit leaves, and the memory its
processes share."""

from __future__ import annotations

from launcher.caps.model import Bound, Budget, Limit, Ulimit
from launcher.probe.host import HostFacts
from launcher.profiles.loader import Profile
from launcher.profiles.schema import AUTO


def pids_budget(limits: dict[str, Limit], ulimits: dict[str, Ulimit],
                 facts: HostFacts) -> Budget:
    """Tasks available to the workload, and which limit gives the fewest."""
    cands: list[tuple[int, str, Bound]] = []
    if limits["pids"].value:
        cands.append((int(limits["pids"].value), f"pids limit {limits['pids'].value}",
                      Bound.PIDS_LIMIT))
    cg = facts.cgroup
    if cg.pids_max is not None:
        where = f" of {facts.host_path(cg.binding['pids'])}" if "pids" in cg.binding else ""
        cands.append((cg.pids_max - (cg.pids_current or 0),
                      f"pids.max {cg.pids_max}{where} (pids.current {cg.pids_current or 0})",
                      Bound.PIDS_MAX))
    nproc = ulimits.get("nproc")
    soft = nproc.soft if nproc else (facts.rlimits["nproc"].soft if "nproc" in facts.rlimits
                                     else None)
    notes = []
    if soft is not None and soft >= 0 and facts.nproc_exempt:
        notes.append(f"RLIMIT_NPROC {soft} does not bind: the kernel exempts root (of the "
                     f"initial user namespace, or CAP_SYS_RESOURCE/CAP_SYS_ADMIN there)")
    elif soft is not None and soft >= 0:  # 0: no new task at all
        cands.append((soft - facts.uid_tasks,
                      f"RLIMIT_NPROC {soft} ({facts.uid_tasks} tasks of UID {facts.uid} running)",
                      Bound.NPROC))
    # every task the kernel runs counts against threads-max, and holds a PID under pid_max
    # (per PID namespace on Linux 6.14+, where the namespace's own tasks count: the kernel's
    # total is at least those, so the figure errs low); those running are not available
    running = "" if facts.tasks is None else f" ({facts.tasks} tasks running)"
    for value, name in ((facts.threads_max, "kernel.threads-max"),
                        (facts.pid_max, "kernel.pid_max")):
        if value:
            cands.append((value - (facts.tasks or 0), f"{name} {value}{running}", Bound.KERNEL))
    if not cands:
        return Budget(None, "no limit found", tuple(notes))
    avail, why, bound = min(cands, key=lambda c: c[0])  # a tie: the first, the most specific
    return Budget(avail, why, tuple(notes), bound)


def memory_budget(profile: Profile, limits: dict[str, Limit], facts: HostFacts) -> int | None:
    """What the workload's processes share: the memory limit, else the smaller of the profile's
    hardware.memory (the target's RAM) and this host's (its cgroup's limit, or its RAM)."""
    hw = profile.get("hardware.memory", AUTO)
    host = facts.host_memory()
    if limits["memory"].value:
        return int(limits["memory"].value)
    if hw != AUTO:
        return min(hw, host) if host else int(hw)
    return host
