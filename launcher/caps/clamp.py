"""Limits lowered to what this host has: ulimits to the hard limits a process may set, a memory
limit to the host's memory; the one clamp for `launcher run`, the native runtime and the
supervisor."""

from __future__ import annotations

from launcher.caps.model import Caps, Limit, Ulimit
from launcher.probe.host import HostFacts
from launcher.units import format_size


def fit_rlimit(soft: int, hard: int, ceiling: int | None) -> tuple[int, int]:
    """A (soft, hard) pair (-1 = unlimited) lowered to fit under `ceiling` (None = unlimited):
    what an unprivileged process, or a daemon without CAP_SYS_RESOURCE, can set."""
    if ceiling is None:
        return soft, hard
    hard = ceiling if hard < 0 else min(hard, ceiling)
    return (hard if soft < 0 else min(soft, hard)), hard


def clamp_ulimits(caps: Caps, facts: HostFacts) -> Caps:
    """Lower ulimits to the hard limits in `facts` (this host's, or inside a container its
    own): the one clamp for `launcher run`, the native runtime and the supervisor."""
    for name, u in caps.ulimits.items():
        host = facts.rlimits.get(name)
        if host is None or host.hard is None:
            continue
        soft, hard = fit_rlimit(u.soft, u.hard, host.hard)
        if (soft, hard) != (u.soft, u.hard):
            shown = format_size(host.hard) if name in ("stack", "memlock") else host.hard
            caps.ulimits[name] = Ulimit(soft, hard, f"{u.source}, lowered to this host's hard "
                                                    f"limit {shown} (only a privileged process "
                                                    f"can raise a hard limit)", lowered=True)
    return caps


def clamp_memory(limits: dict[str, Limit], facts: HostFacts) -> None:
    """A memory limit above this host's memory (its cgroup's limit, else its RAM) lowered to
    it, as a ulimit is to the hard limit: the figure printed is then the one that binds."""
    mem = limits.get("memory")
    host = facts.host_memory()
    if mem is None or not isinstance(mem.value, (int, float)) or not host or mem.value <= host:
        return
    what = ("the memory limit of its cgroup" if facts.cgroup.memory_limit else "its RAM")
    limits["memory"] = Limit(host, f"{mem.source} = {format_size(int(mem.value))}, lowered to "
                                   f"this host's memory {format_size(host)} ({what})",
                             mem.origin, lowered=True)
