"""How a job is cut and how many chunks run at once, from the spec and the resolved profile
(pure: no I/O).

concurrency = min(slots, floor(usable / peak per chunk), the profile's cap, --max-concurrent,
the pids budget / tasks per chunk), where usable = (the memory limit, else hardware.memory -
reserved_memory, else this host's memory) x safety (default 0.8), and the slots are the GPUs
(one chunk per GPU) or, on the CPU, what the cap asks for, else the CPUs the thread pools of one
chunk leave room for. The bound that gives the fewest is named. That is one machine's cap;
the job's, over the spec's `nodes` machines of the profile's kind, is nodes x that (a
Kubernetes render's parallelism), never more than the chunks.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from launcher.caps.budget import memory_budget
from launcher.caps.resolve import Resolved
from launcher.caps.sizing import cpuset_count
from launcher.jobs.spec import JobSpec
from launcher.units import format_size

DEFAULT_SAFETY = 0.8
WAVES = 4  # with chunk_size auto and no profile size: about this many chunks per slot


@dataclass
class JobPlan:
    items: int
    chunk_size: int
    min_chunk_size: int
    chunks: list[tuple[int, int]]
    gpus: list[int | None]  # the slot -> GPU of each slot that runs (None on the CPU)
    concurrency: int
    binding: str  # which bound set the concurrency
    bounds: dict[str, int] = field(default_factory=dict)
    peak_bytes: int | None = None  # expected peak of one chunk = its memory limit
    usable_bytes: int | None = None
    tasks_per_chunk: int = 1
    nodes: int = 1  # machines of the profile's kind the job runs on (the spec's `nodes`)

    @property
    def job_concurrency(self) -> int:
        """Chunks at once over the job's nodes, each at its own cap; at most the chunks."""
        return max(1, min(self.concurrency * self.nodes, len(self.chunks)))

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["chunks"] = len(self.chunks)
        out["job_concurrency"] = self.job_concurrency
        return out

    @property
    def slots(self) -> int:
        """GPUs, or CPU slots: how many chunks could run at once before memory, the profile's
        cap and the pids budget have their say."""
        return self.bounds.get("GPU slots") or self.bounds.get("CPU slots") or self.concurrency

    def sentence(self) -> str:
        peak = f", {format_size(self.peak_bytes)} each" if self.peak_bytes else ""
        where = (f"GPUs {', '.join(str(g) for g in self.gpus)}" if self.gpus[0] is not None
                 else "the CPU")
        return (f"{len(self.chunks)} chunks of {self.chunk_size} items ({self.items} items), "
                f"{self.concurrency} at once{peak} on {where}; set by {self.binding}")


def plan_job(spec: JobSpec, r: Resolved, max_concurrent: int | None = None) -> JobPlan:
    caps, profile = r.caps, r.profile
    bounds: dict[str, int] = {}
    cap = profile.get("jobs.max_concurrent")
    gpu_ids = list(r.selection.ids)
    if gpu_ids:
        bounds["GPU slots"] = len(gpu_ids)
    elif max_concurrent or cap:
        bounds["CPU slots"] = int(max_concurrent or cap)
    else:
        # every chunk runs on the profile's cpuset, when it has one
        cpus = min(r.facts.effective_cpus,
                   cpuset_count(profile.get("limits.cpuset")) or r.facts.effective_cpus)
        bounds["CPU slots"] = max(1, cpus // max(1, caps.threads["omp"]))
    peak = profile.get("workers.memory")
    safety = float(profile.get("jobs.safety", DEFAULT_SAFETY))
    budget = memory_budget(profile, caps.limits, r.facts)
    usable = int(budget * safety) if budget else None
    if peak and usable:
        bounds[f"memory ({format_size(usable)} usable / {format_size(peak)} per chunk)"] = \
            max(1, usable // peak)
    if cap:
        bounds["the profile's jobs.max_concurrent"] = int(cap)
    if max_concurrent:
        bounds["--max-concurrent"] = max_concurrent
    tasks = caps.estimate.per_process + 1  # + the chunk's supervisor
    if caps.budget.available:
        bounds[f"the pids budget ({caps.budget.binding})"] = max(
            1, caps.budget.available // tasks)
    binding, concurrency = min(bounds.items(), key=lambda kv: kv[1])
    size = spec.chunk_size or profile.get("jobs.chunk_size") or max(
        1, math.ceil(spec.items / (concurrency * spec.nodes * WAVES)))
    chunks = [(s, min(s + size, spec.items)) for s in range(0, spec.items, size)]
    gpus: list[int | None] = list(gpu_ids[:concurrency]) if gpu_ids else [None] * concurrency
    return JobPlan(spec.items, size, spec.min_chunk_size or max(1, size // 8), chunks, gpus,
                   concurrency, binding, bounds, peak, usable, tasks, spec.nodes)
