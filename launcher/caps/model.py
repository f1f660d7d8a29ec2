"""The caps' data model: each value with its source, the limits, the ulimits, the verdict."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

UNLIMITED_RLIMIT = -1


@dataclass
class Setting:
    value: str | None  # None: removed from the environment
    source: str
    replaced: str | None = None  # the inherited value this one replaced


@dataclass
class Limit:
    value: int | float | None  # None: no limit of ours
    source: str


@dataclass
class Ulimit:
    soft: int  # -1 = unlimited
    hard: int
    source: str


@dataclass
class Verdict:
    level: str  # ok | warn | refuse
    reasons: list[str] = field(default_factory=list)


@dataclass
class Caps:
    profile: str
    framework: str
    processes: int
    cpus: int  # CPUs the pools of all processes together are sized for (each: cpus // processes)
    threads: dict[str, int]  # intra_op, inter_op, omp, blas: each process's pools
    env: dict[str, Setting]
    ulimits: dict[str, Ulimit]
    limits: dict[str, Limit]  # pids, shm, cpus, cpuset, memory (the whole run's)
    gpu: dict[str, Any]
    estimate: dict[str, Any]
    budget: dict[str, Any]
    verdict: Verdict

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def environment(self) -> dict[str, str]:
        """The variables to set (removed ones excluded)."""
        return {k: s.value for k, s in self.env.items() if s.value is not None}

    def removed(self) -> list[str]:
        return sorted(k for k, s in self.env.items() if s.value is None)


def threads_in_all(estimate: dict) -> str:
    """`~23 threads (~21 per process + 1 supervisor + 1 of the workload's own)`: the figure a
    check compares with a budget, the same words on every line that prints it (start line,
    plan, refusal, report)."""
    total, per, procs = estimate["total"], estimate["per_process"], estimate.get("processes", 1)
    each = f"{procs} processes x ~{per}" if procs > 1 else f"~{per} per process"
    extra = (f" + {estimate['extra']} of the workload's own" if estimate.get("extra") else "")
    return f"~{total} thread{'' if total == 1 else 's'} ({each} + 1 supervisor{extra})"
