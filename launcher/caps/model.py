"""The caps' data model: each value with its source, the limits, the ulimits, the verdict, the
thread estimate, the pids budget and the GPUs. A source is words for people; what code decides
on is beside it as data (an origin, a kind, a flag), never read back out of the words."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, is_dataclass
from enum import Enum
from typing import Any

from launcher.caps.stacks import Stacks

UNLIMITED_RLIMIT = -1
HIDDEN = {"json": False}  # a field's metadata: data for code, not in the --json output


class Origin(Enum):
    """Where a setting or a limit comes from."""

    LAUNCHER = "launcher"  # launcher's own value: derived (auto), or from a profile key it reads
    AUTO = "auto"  # derived from the host or from another value, nothing asked
    PROFILE = "profile"  # a profile key (for a variable: the profile's env section too)
    OVERRIDE = "override"  # --env
    INHERITED = "inherited"  # the environment the workload would inherit
    DEFAULT = "default"  # nothing asked: the engine's or the host's own


@dataclass
class Setting:
    value: str | None  # None: removed from the environment
    source: str
    replaced: str | None = None  # the inherited value this one replaced
    origin: Origin = field(default=Origin.LAUNCHER, metadata=HIDDEN)

    def chosen(self) -> bool:
        """The profile's or launcher's own choice (no override, nothing inherited)."""
        return self.origin in (Origin.LAUNCHER, Origin.PROFILE)


@dataclass
class Limit:
    value: int | float | None  # None: no limit of ours
    source: str
    origin: Origin = field(default=Origin.PROFILE, metadata=HIDDEN)
    lowered: bool = field(default=False, metadata=HIDDEN)  # to what this host has


@dataclass
class Ulimit:
    soft: int  # -1 = unlimited
    hard: int
    source: str
    lowered: bool = field(default=False, metadata=HIDDEN)  # to this host's hard limit


class Why(Enum):
    """What a verdict's reason is about."""

    CPUSET = "cpuset"  # CPUs the host does not let the workload run on
    PIDS = "pids"  # the threads against the pids budget
    OVERSUBSCRIBED = "oversubscribed"  # compute pools larger than their CPUs
    MEMORY = "memory"  # the workers' memory against the memory budget
    GPU_SHORT = "gpu_short"  # more GPUs asked for than this host shows
    FRAMEWORK = "framework"  # a framework's own check
    VENDOR = "vendor"  # a GPU vendor's own check
    WORKLOAD = "workload"  # a workload's own check (on its profile keys)
    STACKS = "stacks"  # thread stacks against an address-space limit
    ABOVE_OUTER = "above_outer"  # a limit above one the workload is already under
    DEPRECATED = "deprecated"  # an inherited variable that is deprecated
    FIT_ADVICE = "fit_advice"  # what --fit would run it with
    NOTHING_FITS = "nothing_fits"  # why --fit (or limits.fit) finds nothing


@dataclass(frozen=True)
class Reason:
    kind: Why
    text: str  # one sentence

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Verdict:
    level: str  # ok | warn | refuse
    said: tuple[Reason, ...] = ()

    @property
    def reasons(self) -> list[str]:
        """Each reason's sentence."""
        return [r.text for r in self.said]

    def adding(self, reason: Reason) -> Verdict:
        """The same verdict with one more reason (its level unchanged)."""
        return Verdict(self.level, (*self.said, reason))

    def to_json(self) -> dict[str, Any]:
        return {"level": self.level, "reasons": self.reasons}


@dataclass(frozen=True)
class GpuPlan:
    """The GPUs a run is planned for."""

    vendor: str
    count: int  # selected
    found: int  # of the vendor's, on this host
    model: str | None
    gfx_version: str | None
    per_process: int = 0  # the GPUs each process is budgeted for
    by_layout: bool = False  # one each because the profile runs a process per GPU


@dataclass(frozen=True)
class Estimate:
    """Threads at their peak, for the whole run."""

    per_process: int
    breakdown: dict[str, int]
    processes: int
    extra: int  # the workload's own, besides its processes
    total: int  # processes x per_process + 1 supervisor + extra
    source: str
    stacks: Stacks

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        return {**out, "breakdown": dict(self.breakdown), "stacks": {
            **asdict(self.stacks), "reserved": self.stacks.reserved,
            "address_space": self.stacks.address_space}}

    def in_all(self) -> str:
        return threads_in_all(self.to_json())


class Bound(Enum):
    """Which limit gives the pids budget."""

    NONE = "none"
    PIDS_LIMIT = "pids_limit"  # the profile's limits.pids
    PIDS_MAX = "pids_max"  # the cgroup's pids.max
    NPROC = "nproc"  # RLIMIT_NPROC
    KERNEL = "kernel"  # kernel.threads-max or kernel.pid_max


@dataclass(frozen=True)
class Budget:
    """Tasks available to the workload, and which limit gives the fewest."""

    available: int | None
    binding: str  # that limit, in words
    notes: tuple[str, ...] = ()
    bound_by: Bound = field(default=Bound.NONE, metadata=HIDDEN)

    def to_json(self) -> dict[str, Any]:
        return {"available": self.available, "binding": self.binding, "notes": list(self.notes)}


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
    gpu: GpuPlan
    estimate: Estimate
    budget: Budget
    verdict: Verdict

    def to_json(self) -> dict[str, Any]:
        return {f.name: _public(getattr(self, f.name)) for f in fields(self)}

    def environment(self) -> dict[str, str]:
        """The variables to set (removed ones excluded)."""
        return {k: s.value for k, s in self.env.items() if s.value is not None}

    def removed(self) -> list[str]:
        return sorted(k for k, s in self.env.items() if s.value is None)


def _public(value: Any) -> Any:
    """A value as --json shows it: its own to_json, or its fields less the hidden ones."""
    if hasattr(value, "to_json"):
        return value.to_json()
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _public(getattr(value, f.name)) for f in fields(value)
                if f.metadata.get("json", True)}
    if isinstance(value, dict):
        return {k: _public(v) for k, v in value.items()}
    return value


def threads_in_all(estimate: dict) -> str:
    """`~23 threads (~21 per process + 1 supervisor + 1 of the workload's own)`: the figure a
    check compares with a budget, the same words on every line that prints it (start line,
    plan, refusal, report)."""
    total, per, procs = estimate["total"], estimate["per_process"], estimate.get("processes", 1)
    each = f"{procs} processes x ~{per}" if procs > 1 else f"~{per} per process"
    extra = (f" + {estimate['extra']} of the workload's own" if estimate.get("extra") else "")
    return f"~{total} thread{'' if total == 1 else 's'} ({each} + 1 supervisor{extra})"
