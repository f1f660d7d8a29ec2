"""A cgroup of its own for a native run, so the kernel enforces the pids, memory and CPU caps.

cgroup v1 (as on this kind of host): a child of the caller's cgroup in each needed controller,
when writable. cgroup v2: a child of the caller's cgroup when that subtree is delegated (the
controllers can be enabled in it). Anything that cannot be enforced is reported as advisory.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path

from launcher.probe.cgroup import find_chains
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


def make_run_cgroup(name: str, pids: int | None, memory: int | None, cpus: float | None,
                    root: Path = Path("/")) -> RunCgroup:
    wanted = {k: v for k, v in (("pids", pids), ("memory", memory), ("cpus", cpus)) if v}
    rc = RunCgroup()
    if not wanted:
        return rc
    try:
        chains = find_chains(root)
    except Exception as exc:  # noqa: BLE001 - no cgroup is a reason to advise, not to fail
        chains = {}
        reason = f"cgroups unreadable: {exc}"
    else:
        reason = "no cgroup controller found"
    for cap, value in wanted.items():
        ctrl = _CONTROLLER_OF[cap]
        chain = chains.get(ctrl)
        if chain is None:
            rc.advisory[cap] = f"{reason} for {ctrl}"
            continue
        try:
            d = _make_dir(chain.dirs[0], chain.version, ctrl, name, rc)
            _write_limit(d, chain.version, cap, value)
        except OSError as exc:
            rc.advisory[cap] = f"cannot write a {ctrl} cgroup: {exc.strerror or exc}"
            continue
        rc.dirs[ctrl] = d
        shown = format_size(int(value)) if cap == "memory" else f"{value:g}"
        rc.enforced[cap] = f"{shown} (cgroup {chain.version} {ctrl})"
    return rc


def _make_dir(parent: Path, version: str, ctrl: str, name: str, rc: RunCgroup) -> Path:
    if version == "v2":
        existing = next((d for c, d in rc.dirs.items()), None)
        if existing is not None:
            return existing
        subtree = parent / "cgroup.subtree_control"
        enabled = set(subtree.read_text().split())
        missing = [c for c in ("pids", "memory", "cpu") if c not in enabled]
        if missing:  # fails unless this subtree is delegated to us
            subtree.write_text(" ".join(f"+{c}" for c in missing))
    d = parent / name
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
