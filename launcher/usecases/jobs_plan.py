"""`launcher jobs plan`: how a job is cut and how many chunks run at once here, and why."""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.caps.model import Why
from launcher.flags import (
    ENV,
    FRAMEWORK,
    GPUS,
    HOST_ROOT,
    JOB_PROFILE,
    MAX_CONCURRENT,
    SPEC,
    argv_of,
    flag,
)
from launcher.jobs.job import Prepared, prepare
from launcher.jobs.summary import lines as summary_lines
from launcher.jobs.summary import run_line
from launcher.usecases.bench_memory import BenchRequest

__all__ = ["JobsPlanRequest", "JobsPlanResult", "plan", "run_line", "summary_lines"]


@dataclass(frozen=True, kw_only=True)
class JobsPlanRequest:
    spec: Path = flag(SPEC, dataclasses.MISSING)
    profile: str | None = flag(JOB_PROFILE)
    framework: str | None = flag(FRAMEWORK)
    max_concurrent: int | None = flag(MAX_CONCURRENT)
    gpus: str | None = flag(GPUS)
    env: dict[str, str] = flag(ENV, {})
    host_root: Path | None = flag(HOST_ROOT)


@dataclass(frozen=True, kw_only=True)
class JobsPlanResult:
    prepared: Prepared
    data: dict[str, Any]  # --json
    shortfall: str | None  # GPUs this host lacks (`jobs run` refuses)
    reasons: tuple[str, ...]  # the verdict's, less the GPUs' own where `shortfall` says it
    bench_hint: str  # the `launcher bench-memory` that measures workers.memory for this job


def plan(req: JobsPlanRequest) -> JobsPlanResult:
    p = prepare(req.spec, profile=req.profile, framework=req.framework,
                max_concurrent=req.max_concurrent, env=dict(req.env), host_root=req.host_root,
                gpus=req.gpus)
    r = p.resolved
    data = {"job": p.spec.name, "profile": r.profile.name, "framework": r.framework,
            "folder": str(p.spec.folder()), "plan": p.plan.to_json(),
            "verdict": r.caps.verdict.level, "reasons": r.caps.verdict.reasons}
    short = r.selection.shortfall
    reasons = tuple(x.text for x in r.caps.verdict.said
                    if not (short and x.kind is Why.GPU_SHORT))  # said once, at the top
    return JobsPlanResult(prepared=p, data=data, shortfall=short, reasons=reasons,
                          bench_hint=_bench_hint(p, req))


def _bench_hint(p: Prepared, req: JobsPlanRequest) -> str:
    """`launcher bench-memory` for this job: half, one and two chunks (within the items),
    writing a profile beside the spec."""
    size, items = p.plan.chunk_size, p.spec.items
    sizes = sorted({min(items, s) for s in (max(1, size // 2), size, 2 * size)})
    if len(sizes) < 2:
        sizes = [1, 2] if items >= 2 else sizes
    measured = p.spec.path.resolve().parent / f"{p.resolved.profile.name}-measured.yaml"
    bench = BenchRequest(spec=req.spec, sizes=tuple(sizes), profile=req.profile or p.spec.profile,
                         write_profile=measured, gpus=req.gpus)
    return shlex.join(["launcher", "bench-memory", *argv_of(bench)])
