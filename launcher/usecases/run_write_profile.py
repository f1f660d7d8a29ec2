"""`launcher run --write-profile FILE`: checked before the run, written after one that
succeeded; a stress workload's findings, or any run's measurements (measured_profile.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from launcher.caps.resolve import Resolved
from launcher.errors import LauncherError
from launcher.units import format_size, mib_up
from launcher.usecases.events import Teller
from launcher.usecases.run_request import RunRequest
from launcher.workloads.catalog import Workload


def check_write_profile(req: RunRequest, workload: Workload | None, prof: Any) -> None:
    if req.write_profile is None:
        return
    if _is_stress(workload) and any(a == "--out" or a.startswith("--out=")
                                    for a in req.command[1:]):
        raise LauncherError("--write-profile reads the results from the run's folder: leave "
                            "out the workload's --out")
    from launcher.profiles.writer import check_target

    check_target(req.write_profile, prof, "--write-profile")


def _is_stress(workload: Workload | None) -> bool:
    """A stress run writes its own findings (recommended settings) beside what was measured."""
    return workload is not None and workload.module is not None and hasattr(
        workload.module_object(), "recommendation")


def write_any_profile(req: RunRequest, status: int, workload: Workload | None, r: Resolved,
                      run_dir: Path, command: list[str], tell: Teller) -> None:
    """A stress run's findings, or any run's measurements; only after a run that succeeded
    (a peak cut short by a limit is no peak to plan with)."""
    import shlex

    from launcher.usecases.measured_profile import write_measured_profile

    assert req.write_profile is not None
    if status != 0:
        tell.warn(f"--write-profile: {req.write_profile} not written: the run exited with "
                  f"status {status}, so its peaks are not the ones it needs; run it again "
                  f"under higher limits (or none) to measure them")
        return
    if _is_stress(workload):
        assert workload is not None
        _write_profile(req.write_profile, workload, r, run_dir, tell)
        return
    what = workload.name if workload else " ".join(shlex.join(command).split())[:60]
    tell.say(write_measured_profile(req.write_profile, r, run_dir,
                                    f"launcher run {what} --write-profile"))


def _write_profile(path: Path, workload: Workload, r: Resolved, run_dir: Path,
                   tell: Teller) -> None:
    """A profile extending the run's, with what the stress run found: its recommended
    settings, workers.memory from the measured peak, and the thread pools it ran with."""
    from launcher.profiles.writer import shown, write_profile

    try:
        found, notes = workload.module_object().recommendation(run_dir / workload.name)
    except (OSError, ValueError, KeyError) as exc:
        raise LauncherError(f"--write-profile: {exc}") from None
    summary = json.loads((run_dir / "summary.json").read_text())
    rss = (summary["peaks"].get("rss_bytes") or {}).get("peak")
    threads = summary["peaks"].get("threads") or {}
    t = r.caps.threads
    sections: dict[str, object] = {"framework": r.framework, "recommended": found,
                                   "threads": {"intra_op": t["intra_op"],
                                               "inter_op": t["inter_op"], "omp": t["omp"]}}
    if rss:
        memory = -(-rss * 5 // 4)
        sections["workers"] = {"memory": mib_up(memory)}
        notes.append(f"workers.memory: the run's peak RSS {format_size(rss)} + 25% = "
                     f"{mib_up(memory)}.")
    notes.append(f"threads: the pools this run had ({r.caps.estimate.source}); peak "
                 f"{threads.get('peak')} threads observed, {threads.get('estimate')} "
                 f"estimated, run {run_dir.name}.")
    by = f"launcher run {workload.name} --write-profile"
    write_profile(path, r.profile, by, sections, notes)
    tell.say(f"wrote {path}: `launcher plan --profile {shown(path)}`; a run under it uses "
             f"{', '.join(f'{k} {v}' for k, v in found.items())}")

