"""`launcher plan`: the caps `launcher run` would use here, from the same resolve: with a
workload's framework and its own threads when one is named, so plan and run give the same
verdict; --fit applied or advised as run does it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.caps.model import threads_in_all
from launcher.flags import ENV, FIT, FRAMEWORK, GPUS, HOST_ROOT, PROCESSES, PROFILE, Flag, flag

__all__ = ["PlanRequest", "PlanResult", "plan", "threads_in_all"]


@dataclass(frozen=True, kw_only=True)
class PlanRequest:
    profile: str = flag(PROFILE, "auto")
    framework: str | None = flag(FRAMEWORK)
    processes: int | None = flag(PROCESSES)
    env: dict[str, str] = flag(ENV, {})
    gpus: str | None = flag(GPUS)
    workload: str | None = flag(Flag(
        ("--workload",), "Budget for this workload as `launcher run NAME` does: its framework "
        "and its own threads (a driver, a sampler), so plan and run give the same verdict.",
        metavar="NAME"))
    fit: bool = flag(FIT, False)
    host_root: Path | None = flag(HOST_ROOT)


@dataclass(frozen=True, kw_only=True)
class PlanResult:
    data: dict[str, Any]  # the caps as JSON, with "fit" where --fit or limits.fit shrank them
    fitted: str | None  # the line that says how


def plan(req: PlanRequest) -> PlanResult:
    from launcher.caps.load import load_and_resolve
    from launcher.usecases.fit import fit_or_advise

    framework, extra = req.framework, 0
    if req.workload is not None:
        from launcher.workloads.catalog import find_workload

        w = find_workload(req.workload)
        framework, extra = framework or w.framework, w.extra_threads
    r = load_and_resolve(req.profile, host_root=req.host_root, framework=framework,
                         processes=req.processes, overrides=dict(req.env), gpus=req.gpus,
                         clamp=True, extra_threads=extra)
    r, fitted = fit_or_advise(r, apply=req.fit)
    data = r.caps.to_json()
    if fitted:
        data["fit"] = fitted
    return PlanResult(data=data, fitted=fitted)
