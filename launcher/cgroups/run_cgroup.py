"""A cgroup of its own for a native run, so the kernel enforces the pids, memory and CPU caps.

Where it goes is placement.py's rule (v1: a child of the caller's cgroups; v2: where the
controllers can be enabled, carrying the limits of any cgroup it leaves); this module carries
it out, writes the limits (a carried one where it is tighter than the one asked for), names
the limit that binds (the tightest of the run's cgroup and every ancestor it stays under), and
leaves the caller's cgroup as it found it. What cannot be enforced is advisory, each cap
apart, with the sentence that says why.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from launcher.cgroups.leaf import undo_leaf
from launcher.cgroups.placement import (
    Decision,
    Placement,
    Writable,
    can_write,
    place,
)
from launcher.units import format_size

_CONTROLLER_OF = {"pids": "pids", "memory": "memory", "cpus": "cpu"}
_LIMIT_FILE = {("pids", "v2"): "pids.max", ("memory", "v2"): "memory.max",
               ("cpus", "v2"): "cpu.max", ("pids", "v1"): "pids.max",
               ("memory", "v1"): "memory.limit_in_bytes", ("cpus", "v1"): "cpu.cfs_quota_us"}


@dataclass
class RunCgroup:
    dirs: dict[str, Path] = field(default_factory=dict)  # controller -> the run's directory
    enforced: dict[str, str] = field(default_factory=dict)  # cap -> how
    advisory: dict[str, str] = field(default_factory=dict)  # cap -> why not enforced
    notes: list[str] = field(default_factory=list)  # carried limits, limits above an outer one
    placed: list[dict[str, object]] = field(default_factory=list)  # for summary.json
    binding: dict[str, dict[str, object]] = field(default_factory=dict)  # cap -> value, where
    undo: list[tuple[Path, tuple[str, ...], Path]] = field(default_factory=list)  # leaf moves
    counting: bool = False  # a pids cgroup only to count the run's tasks (no limit asked)

    def join(self, pid: int) -> None:
        """Move `pid` into every directory (the supervisor also joins them itself, before it
        starts the workload; this makes /proc/PID/cgroup right for telemetry from the start)."""
        for d in set(self.dirs.values()):
            with contextlib.suppress(OSError):
                (d / "cgroup.procs").write_text(str(pid))

    def cleanup(self) -> None:
        """Remove the run's directories, then put the caller's cgroup back as it was (a leaf
        move undone: the controllers launcher enabled there off, its processes back). A
        process still in them is the run's, left by a supervisor that was killed before it
        could stop the tree (it leaves nothing otherwise): it is killed."""
        for d in set(self.dirs.values()):
            for _ in range(50):  # the last task may take a moment to leave
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    kill_all(d)
                    time.sleep(0.05)
        for caller, controllers, leaf in self.undo:
            undo_leaf(caller, controllers, leaf)
        self.undo.clear()


def procs_of(d: Path) -> list[int]:
    """The processes in the cgroup `d` (none where it cannot be read)."""
    try:
        return [int(x) for x in (d / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def kill_all(d: Path) -> None:
    """SIGKILL to every process in the cgroup `d`."""
    for pid in procs_of(d):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


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


def make_run_cgroup(name: str, *, pids: int | None, memory: int | None, cpus: float | None,
                    root: Path = Path("/"), writable: Writable = can_write,
                    ours: Collection[int] | None = None, count: bool = False) -> RunCgroup:
    """The run's cgroup for the limits asked for. `count`: a pids cgroup even where no pids
    limit is asked for, so that the kernel counts the run's tasks (its pids.peak is the peak
    a report shows); placed by the same rule, never loosening a limit; nothing when it
    cannot be placed (no limit was asked for, so nothing is advisory)."""
    wanted = wanted_caps(pids, memory, cpus)
    counting = count and "pids" not in wanted
    rc = RunCgroup()
    if not wanted and not counting:
        return rc
    decision = decide([*wanted, "pids"] if counting else wanted, root, writable, ours)
    rc.advisory.update(advisory_of(wanted, decision))
    made: dict[str, tuple[Placement, Path]] = {}
    for p in decision.placements:
        try:
            d = make_placed(p, name)
        except OSError as exc:
            if p.leaf is not None:  # launcher's processes back, C's controllers off again
                undo_leaf(p.parent, [c for e, cs in p.enable if e == p.parent for c in cs],
                          p.leaf)
            for ctrl in p.controllers:
                rc.advisory.update({cap: f"cannot make a {ctrl} cgroup ({p.version}): "
                                         f"{exc.strerror or exc}"
                                    for cap in wanted if _CONTROLLER_OF[cap] == ctrl})
            continue
        if p.leaf is not None:
            rc.undo.append((p.parent, tuple(c for e, cs in p.enable if e == p.parent
                                            for c in cs), p.leaf))
        try:
            _write_carried(d, p)
        except OSError as exc:  # never loosen: no run here without what it leaves
            why = f"cannot carry the limits of {p.caller} onto {d}: {exc.strerror or exc}"
            rc.advisory.update({cap: why for cap in wanted
                                if _CONTROLLER_OF[cap] in p.controllers})
            _remove(d)
            continue
        made.update({ctrl: (p, d) for ctrl in p.controllers})
        rc.placed.append({"version": p.version, "mode": p.mode, "parent": str(p.parent),
                          "caller": str(p.caller), "dir": str(d),
                          "controllers": list(p.controllers), "where": p.describe(),
                          "carried": {k.file: {"value": k.value, "from": str(k.source)}
                                      for k in p.carry}})
        if p.carry:
            rc.notes.append(
                f"the run's cgroup {d} carries "
                + ", ".join(f"{k.file} {_shown(k.file, k.value)} of {k.source}" for k in p.carry)
                + f", which it leaves: its accounting is no longer shared with the processes "
                  f"left in {p.caller}")
    if counting and "pids" in made:  # no limit of ours: pids.max stays as made (or carried)
        rc.dirs["pids"] = made["pids"][1]
        rc.counting = True
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
        rc.enforced[cap] = _enforced(rc, d, p, cap, value)
    for ctrl, (_, d) in made.items():  # a cgroup whose every limit failed is removed
        if ctrl not in rc.dirs and d not in rc.dirs.values():
            _remove(d)
    if not rc.dirs:
        rc.cleanup()  # nothing placed: a leaf move is undone at once
    return rc


def _enforced(rc: RunCgroup, d: Path, p: Placement, cap: str, asked: float) -> str:
    """How `cap` is enforced: the figure that binds (the tightest along the run's cgroup and
    its ancestors), and where (a carried limit: the cgroup it came from); a note when it is
    below the one asked for."""
    version = p.version
    value, where = binding_limit(d, version, cap)
    carried = next((k for k in p.carry if k.file == _LIMIT_FILE[cap, version]), None)
    if where == d and carried is not None and value is not None and value < asked - 1e-9:
        where = carried.source  # carried from there
    shown = _format(cap, value if value is not None else asked)
    rc.binding[cap] = {"value": _whole(value), "cgroup": str(where), "asked": _whole(asked)}
    ctrl = _CONTROLLER_OF[cap]
    if value is not None and value < asked - 1e-9:
        rc.notes.append(f"limits.{cap} {_format(cap, asked)} is above the "
                        f"{_LIMIT_FILE[cap, version]} {shown} of {where}, which binds")
        return f"{shown} (cgroup {version} {ctrl}, set at {where}; {_format(cap, asked)} asked)"
    return f"{shown} (cgroup {version} {ctrl})"


def binding_limit(d: Path, version: str, cap: str) -> tuple[float | None, Path]:
    """The tightest `cap` limit on `d` and every ancestor up to its hierarchy's top, and the
    cgroup that sets it (`d` when none does)."""
    best: tuple[float, Path] | None = None
    here = d
    while (here / "cgroup.procs").exists():
        value = _read_limit(here, version, cap)
        if value is not None and (best is None or value < best[0]):
            best = (value, here)
        if here.parent == here:
            break
        here = here.parent
    return (best[0], best[1]) if best else (None, d)


def _read_limit(d: Path, version: str, cap: str) -> float | None:
    try:
        if cap == "cpus" and version == "v2":
            quota, _, period = (d / "cpu.max").read_text().strip().partition(" ")
            return None if quota == "max" else int(quota) / int(period or 100_000)
        if cap == "cpus":
            quota = int((d / "cpu.cfs_quota_us").read_text())
            return None if quota < 0 else quota / int((d / "cpu.cfs_period_us").read_text())
        text = (d / _LIMIT_FILE[cap, version]).read_text().strip()
        value = None if text == "max" else int(text)
        return None if value is None or value >= (1 << 62) else float(value)
    except (OSError, ValueError, ZeroDivisionError):
        return None


def _whole(value: float | None) -> float | int | None:
    return int(value) if value is not None and float(value).is_integer() else value


def _format(cap: str, value: float) -> str:
    if cap == "memory":
        return format_size(int(value))
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _shown(file: str, value: str) -> str:
    if file.startswith("memory.") and value.isdigit():
        return format_size(int(value))
    if file == "cpu.max" and len(value.split()) == 2:
        quota, period = value.split()
        return f"{int(quota) / int(period):g} CPUs"
    return value


def _write_carried(d: Path, p: Placement) -> None:
    """The limits of the cgroups the run leaves, onto its own (before the asked ones, which
    only ever tighten them)."""
    for k in p.carry:
        (d / k.file).write_text(k.value)


def _remove(d: Path) -> None:
    with contextlib.suppress(OSError):
        d.rmdir()


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
    """Write the asked limit, unless the run's cgroup already holds a tighter (carried) one."""
    now = _read_limit(d, version, cap)
    if now is not None and now <= value:  # a carried limit is tighter: it stays
        if cap == "memory" and version == "v2":
            with contextlib.suppress(OSError):  # but no swap beyond it, as asked
                (d / "memory.swap.max").write_text("0")
        return
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
