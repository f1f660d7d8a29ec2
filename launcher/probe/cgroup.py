"""Cgroup limits for the calling process: v2, v1 and hybrid hosts, strictest ancestor wins.

(Kept light, no dataclasses: the supervisor imports it at every container and chunk start.)
Every reader takes `root`, the filesystem root to read from (`/` on a live host, a fixture
tree in tests). A missing file means "no limit"; a malformed one raises HostError quoting it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

from launcher.errors import HostError
from launcher.probe.mountinfo import Membership, Mount, parse_mountinfo, parse_proc_cgroup

CONTROLLERS = ("cpu", "cpuset", "memory", "pids")
# v1 reports "no limit" as a huge page-aligned number.
V1_UNLIMITED = 1 << 62


class Chain(NamedTuple):
    """The directories of one controller, leaf first, up to its mount point."""

    version: str  # v1 | v2
    dirs: tuple[Path, ...]


def _join(root: Path, path: str) -> Path:
    return root / path.lstrip("/")


def find_chains(root: Path, pid: str = "self") -> dict[str, Chain]:
    """Controller -> directories to read: PID's cgroups (/proc/PID/cgroup), found through this
    process's mounts (a container's PID has its own mount namespace; ours is the one we read)."""
    mounts = parse_mountinfo(root / "proc/self/mountinfo")
    members = parse_proc_cgroup(root / f"proc/{pid}/cgroup")
    chains: dict[str, Chain] = {}
    unified = next((m for m in members if m.hierarchy == "0" and not m.controllers), None)
    v2_mount = holding_mount(root, [m for m in mounts if m.fstype == "cgroup2"], unified)
    if unified and v2_mount:
        dirs = cgroup_dirs(root, v2_mount, unified)
        # A limit along the way bounds the leaf whether or not the leaf enables the controller
        # itself (cgroup-v2: a cgroup's interface files exist only where its parent enables
        # it), so the controllers of every directory count, not only the leaf's.
        enabled = set().union(*(_v2_controllers(d) for d in dirs))
        for c in CONTROLLERS:
            if c in enabled:
                chains[c] = Chain("v2", dirs)
    for c in CONTROLLERS:
        if c in chains:
            continue
        member = next((m for m in members if c in m.controllers), None)
        mount = holding_mount(root, [m for m in mounts if m.fstype == "cgroup" and
                                c in m.super_options], member)
        if member and mount:
            chains[c] = Chain("v1", cgroup_dirs(root, mount, member))
    return chains


def holding_mount(root: Path, mounts: list[Mount], member: Membership | None) -> Mount | None:
    """Of a hierarchy's mounts, the one that holds the process's cgroup: its root is the
    cgroup's path or an ancestor of it, and the cgroup's directory exists under it (another
    mount, of an unrelated subtree, may be listed first)."""
    if member is None or not mounts:
        return None

    def score(m: Mount) -> tuple[bool, bool, int]:
        mroot = m.root.rstrip("/")
        holds = not mroot or member.path == mroot or member.path.startswith(mroot + "/")
        rel = member.path[len(mroot):] if holds else ""
        return holds, _join(_join(root, m.mount_point), rel).is_dir(), len(mroot)

    return max(mounts, key=score)


def _v2_controllers(d: Path) -> set[str]:
    try:
        return set((d / "cgroup.controllers").read_text().split())
    except FileNotFoundError:
        return set()


def nearest(chain: Chain, name: str) -> Path | None:
    """The file `name` in the directory nearest the leaf that has it (a leaf that enables no
    controller has no interface files: an ancestor's counters include it)."""
    return next((d / name for d in chain.dirs if (d / name).exists()), None)


def cgroup_dirs(root: Path, mount: Mount, member: Membership) -> tuple[Path, ...]:
    """Leaf-to-top directories of `member` under `mount`."""
    top = _join(root, mount.mount_point)
    cg = member.path
    mroot = mount.root.rstrip("/")
    # below the mount's root: the path under it; the mount's root itself, or outside the
    # mounted subtree: the mount is our view
    inside = mroot and (cg == mroot or cg.startswith(mroot + "/"))
    rel = cg[len(mroot):] if inside else cg
    parts = [p for p in rel.split("/") if p]
    dirs = [top / "/".join(parts[:i]) if i else top for i in range(len(parts), -1, -1)]
    existing = tuple(d for d in dirs if d.is_dir())
    return existing or (top,)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise HostError(f"{path}: cannot read: {exc}") from None


def read_int_or_none(path: Path) -> int | None:
    """A counter or limit file as an int; None when missing, `max` or unreadable (for telemetry
    and diagnosis, which must never fail)."""
    try:
        text = path.read_text().strip()
        return None if text == "max" else int(text)
    except (OSError, ValueError):
        return None


def _int(path: Path, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise HostError(f"{path}: malformed value {text!r}") from None


def read_cpu_quota(chain: Chain) -> float | None:
    """Quota in CPUs (e.g. 1.5), the strictest along the chain; None when unlimited."""
    return cpu_quota_at(chain)[0]


def cpu_quota_at(chain: Chain) -> tuple[float | None, Path | None]:
    """The strictest quota along the chain in CPUs, and the cgroup it was read from."""
    best: float | None = None
    where: Path | None = None
    for d in chain.dirs:
        if chain.version == "v2":
            path = d / "cpu.max"
            text = _read(path)
            if text is None:
                continue
            fields = text.split()
            if len(fields) not in (1, 2):
                raise HostError(f"{path}: malformed cpu.max line {text!r}")
            if fields[0] == "max":
                continue
            if len(fields) == 1:
                raise HostError(f"{path}: cpu.max has a quota but no period: {text!r}")
            quota, period = _int(path, fields[0]), _int(path, fields[1])
        else:
            qpath, ppath = d / "cpu.cfs_quota_us", d / "cpu.cfs_period_us"
            qtext, ptext = _read(qpath), _read(ppath)
            if qtext is None or ptext is None:
                continue
            quota, period = _int(qpath, qtext), _int(ppath, ptext)
            if quota < 0:
                continue
            path = ppath
        if period <= 0:
            raise HostError(f"{path}: CPU period is {period}; expected a positive number")
        if quota <= 0:
            raise HostError(f"{path}: CPU quota is {quota}; expected a positive number or max")
        cpus = quota / period
        if best is None or cpus < best:
            best, where = cpus, d
    return best, where


def parse_cpu_list(text: str, path: Path | None = None) -> int:
    """Number of CPUs in a list such as '0-3,8,10-11'."""
    from launcher.cpulist import cpu_ids

    try:
        return len(cpu_ids(text))
    except ValueError:
        raise HostError(f"{path or 'cpu list'}: malformed CPU list {text!r}") from None


def read_cpuset(chain: Chain) -> int | None:
    return cpuset_at(chain)[0]


def cpuset_at(chain: Chain) -> tuple[int | None, Path | None]:
    """The leaf's CPUs (effective where the kernel says them), and the cgroup read."""
    leaf = chain.dirs[0]
    names = (
        ("cpuset.cpus.effective", "cpuset.cpus")
        if chain.version == "v2"
        else ("cpuset.effective_cpus", "cpuset.cpus")
    )
    for name in names:
        text = _read(leaf / name)
        if text:
            return parse_cpu_list(text, leaf / name), leaf
    return None, None


def present_dir(chain: Chain, controller: str) -> Path | None:
    """The cgroup nearest the leaf where `controller` is present (v2: listed in its
    cgroup.controllers, so it has the interface files); None when it is nowhere along the
    chain but at the root, which holds no limit."""
    if chain.version == "v1":
        return chain.dirs[0]
    top = chain.dirs[-1]
    return next((d for d in chain.dirs if controller in _v2_controllers(d)
                 and (d != top or (d / "cgroup.type").exists())), None)


def limit_dir(chain: Chain, name: str) -> Path | None:
    """The cgroup whose `name` (pids.max, memory.max, ...) is the tightest along the chain."""
    best: tuple[int, Path] | None = None
    for d in chain.dirs:
        value = read_int_or_none(d / name)
        if value is not None and value < V1_UNLIMITED and (best is None or value < best[0]):
            best = (value, d)
    return best[1] if best else None


def read_pids(chain: Chain) -> tuple[int | None, int | None]:
    """(max, current) at the ancestor with the least headroom; max None when unlimited."""
    limit, used, _ = pids_binding(chain)
    return limit, used


def pids_binding(chain: Chain) -> tuple[int | None, int | None, Path | None]:
    """(max, current, the cgroup) at the ancestor with the least headroom: the pids limit
    that binds, and where; (None, the leaf's current, None) when none is set."""
    best: tuple[int, int, Path] | None = None
    leaf_current: int | None = None
    for d in chain.dirs:
        cur_text = _read(d / "pids.current")
        current = _int(d / "pids.current", cur_text) if cur_text is not None else None
        if leaf_current is None:
            leaf_current = current
        max_text = _read(d / "pids.max")
        if max_text is None or max_text == "max":
            continue
        limit = _int(d / "pids.max", max_text)
        used = current if current is not None else (leaf_current or 0)
        if best is None or limit - used < best[0] - best[1]:
            best = (limit, used, d)
    if best is None:
        return None, leaf_current, None
    return best


def read_memory(chain: Chain) -> tuple[int | None, int | None, int | None]:
    """(limit, usage, oom_kills): limit is the strictest along the chain."""
    limit: int | None = None
    v2 = chain.version == "v2"
    for d in chain.dirs:
        path = d / ("memory.max" if v2 else "memory.limit_in_bytes")
        text = _read(path)
        if text is None or text == "max":
            continue
        value = _int(path, text)
        if value < 0 or value >= V1_UNLIMITED:  # 0 is a limit: nothing may be used
            continue
        limit = value if limit is None else min(limit, value)
    leaf = chain.dirs[0]
    upath = leaf / ("memory.current" if v2 else "memory.usage_in_bytes")
    utext = _read(upath)
    usage = _int(upath, utext) if utext is not None else None
    events = nearest(chain, "memory.events" if v2 else "memory.oom_control")
    return limit, usage, read_oom_kills(events.parent if events else leaf, v2)


def read_oom_kills(leaf: Path, v2: bool) -> int | None:
    """OOM kills in this cgroup: memory.events (v2) or memory.oom_control (v1)."""
    path = leaf / ("memory.events" if v2 else "memory.oom_control")
    text = _read(path)
    if text is None:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill":
            return _int(path, value.strip())
    return None


ROUNDINGS = ("down", "half-up")


def round_quota(quota: float, rounding: str = "down") -> int:
    """Whole CPUs from a quota, at least 1: `down` (as uber-go/automaxprocs: a pool one thread
    larger than the quota is throttled every period) or `half-up` (for pools whose idle
    workers block, which make use of a fractional CPU)."""
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of {ROUNDINGS} (got {rounding!r})")
    return max(1, math.floor(quota + 0.5) if rounding == "half-up" else math.floor(quota))


def effective_cpus(affinity: int, cpuset: int | None, quota: float | None,
                   rounding: str = "down") -> int:
    """min(affinity, cpuset, the quota rounded as asked), at least 1. The one function for
    this fact: `doctor` shows it rounded down, the caps size each framework's pools with the
    framework's rounding."""
    candidates = [affinity]
    if cpuset:
        candidates.append(cpuset)
    if quota is not None:
        candidates.append(round_quota(quota, rounding))
    return max(1, min(candidates))
