"""A cgroup of its own for a native run, so the kernel enforces the pids, memory and CPU caps.

Where it goes is cgroup_placement's rule (v1: beside the caller's cgroups; v2: where the
controllers can be enabled); this module carries it out and writes the limits. What cannot be
enforced is advisory, each cap apart, with the sentence that says why.
"""

from __future__ import annotations

import contextlib
import errno
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from launcher.runtime.cgroup_placement import Decision, Placement, Writable, can_write, place
from launcher.units import format_size

_CONTROLLER_OF = {"pids": "pids", "memory": "memory", "cpus": "cpu"}


@dataclass
class RunCgroup:
    dirs: dict[str, Path] = field(default_factory=dict)  # controller -> the run's directory
    enforced: dict[str, str] = field(default_factory=dict)  # cap -> how
    advisory: dict[str, str] = field(default_factory=dict)  # cap -> why not enforced

    def join(self, pid: int) -> None:
        """Move `pid` into every directory (the supervisor also joins them itself, before it
        starts the workload; this makes /proc/PID/cgroup right for telemetry from the start)."""
        for d in set(self.dirs.values()):
            with contextlib.suppress(OSError):
                (d / "cgroup.procs").write_text(str(pid))

    def cleanup(self) -> None:
        for d in set(self.dirs.values()):
            for _ in range(50):  # the last task may take a moment to leave
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)


def wanted_caps(pids: int | None, memory: int | None,
                cpus: float | None) -> dict[str, float]:
    return {k: v for k, v in (("pids", pids), ("memory", memory), ("cpus", cpus)) if v}


def decide(caps: Collection[str], root: Path = Path("/"), writable: Writable = can_write,
           ours: Collection[int] | None = None) -> Decision:
    """Where the caps' cgroup would go (nothing is written): for a preview before a run."""
    try:
        return place([_CONTROLLER_OF[c] for c in caps], root, writable=writable, ours=ours)
    except Exception as exc:  # noqa: BLE001 - no cgroup is a reason to advise, not to fail
        return Decision((), {_CONTROLLER_OF[c]: f"cgroups unreadable: {exc}" for c in caps})


def advisory_of(caps: Collection[str], decision: Decision) -> dict[str, str]:
    """cap -> why it would not be enforced."""
    return {c: decision.advisory[_CONTROLLER_OF[c]] for c in caps
            if _CONTROLLER_OF[c] in decision.advisory}


def make_run_cgroup(name: str, pids: int | None, memory: int | None, cpus: float | None,
                    root: Path = Path("/"), writable: Writable = can_write,
                    ours: Collection[int] | None = None) -> RunCgroup:
    wanted = wanted_caps(pids, memory, cpus)
    rc = RunCgroup()
    if not wanted:
        return rc
    decision = decide(wanted, root, writable, ours)
    rc.advisory.update(advisory_of(wanted, decision))
    made: dict[str, tuple[Placement, Path]] = {}
    for p in decision.placements:
        try:
            d = make_placed(p, name)
        except OSError as exc:
            for ctrl in p.controllers:
                rc.advisory.update({cap: f"cannot make a {ctrl} cgroup ({p.version}): "
                                         f"{exc.strerror or exc}"
                                    for cap in wanted if _CONTROLLER_OF[cap] == ctrl})
            continue
        made.update({ctrl: (p, d) for ctrl in p.controllers})
    for cap, value in wanted.items():
        ctrl = _CONTROLLER_OF[cap]
        if ctrl not in made:
            continue
        p, d = made[ctrl]
        try:
            _write_limit(d, p.version, cap, value)
        except OSError as exc:
            rc.advisory[cap] = f"cannot write the {ctrl} limit in {d}: {exc.strerror or exc}"
            continue
        rc.dirs[ctrl] = d
        shown = format_size(int(value)) if cap == "memory" else f"{value:g}"
        rc.enforced[cap] = f"{shown} (cgroup {p.version} {ctrl})"
    for ctrl, (_, d) in made.items():  # a cgroup whose every limit failed is removed
        if ctrl not in rc.dirs and d not in rc.dirs.values():
            with contextlib.suppress(OSError):
                d.rmdir()
    return rc


def make_placed(p: Placement, name: str) -> Path:
    """Carry out a placement: launcher's processes into the leaf (v2, the way runc and
    Docker-in-Docker do it), the controllers enabled top-down, the run's directory made."""
    if p.leaf is not None:
        p.leaf.mkdir(exist_ok=True)
        for pid in p.move:
            try:
                (p.leaf / "cgroup.procs").write_text(str(pid))
            except OSError as exc:
                if exc.errno != errno.ESRCH:  # a child that has just exited
                    raise
    for d, ctrls in p.enable:
        (d / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in ctrls))
    d = p.parent / name
    d.mkdir(exist_ok=True)
    return d


def _write_limit(d: Path, version: str, cap: str, value: float) -> None:
    if cap == "pids":
        (d / "pids.max").write_text(str(int(value)))
    elif cap == "memory":
        if version == "v2":
            (d / "memory.max").write_text(str(int(value)))
            with contextlib.suppress(OSError):
                (d / "memory.swap.max").write_text("0")
        else:
            (d / "memory.limit_in_bytes").write_text(str(int(value)))
            with contextlib.suppress(OSError):  # no swap beyond the limit, when accounted
                (d / "memory.memsw.limit_in_bytes").write_text(str(int(value)))
    elif cap == "cpus":
        period = 100_000
        quota = max(1000, int(value * period))
        if version == "v2":
            (d / "cpu.max").write_text(f"{quota} {period}")
        else:
            (d / "cpu.cfs_period_us").write_text(str(period))
            (d / "cpu.cfs_quota_us").write_text(str(quota))
