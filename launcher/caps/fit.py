"""Fit a run into its budgets instead of refusing it, as report 002's own fix did (it capped the
pools) and report 000's (it shrank OpenMP's stacks): the largest setting whose estimated peak
fits with headroom.

Thread stacks past an address-space limit (RLIMIT_AS, RLIMIT_DATA) shrink first, down to 1 MiB:
a smaller stack costs nothing until a thread recurses that deep, fewer threads cost throughput.
Then the pools: fewer threads per pool (JAX's through PJRT_NPROC, which `threads.intra_op`
sets), and for JAX, whose codegen pools follow the affinity whatever PJRT_NPROC says, fewer
CPUs (a cpuset, its pools sized for them) last.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Any

from launcher.caps.resolve import Resolved
from launcher.caps.stacks import FIT_SIZES, Stacks, fits
from launcher.caps.verdict import address_limits
from launcher.cpulist import cpu_ids, format_cpu_list
from launcher.frameworks import get as get_framework
from launcher.units import format_size

HEADROOM = 0.8  # the estimate at most this share of the budget: the verdict's own "ok"


@dataclass(frozen=True)  # pragma: no mutate
class Fit:
    values: dict[str, Any]  # the profile keys set
    was: int  # the estimated peak before, in all
    now: int  # and after
    cost: str  # one sentence

    def describe(self) -> str:
        keys = ", ".join(f"{k} {_shown(k, v)}" for k, v in self.values.items())
        peak = (f" (threads at the peak ~{self.was} -> ~{self.now})" if self.was != self.now
                else "")
        return f"{keys}{peak}: {self.cost}"


def fit_to_budget(r: Resolved, headroom: float = HEADROOM) -> Fit | None:
    """None when the run already fits (its pids, its stacks, its CPUs), or when nothing tried
    fits (the refusal stands)."""
    if _fits(r, headroom):  # the CPUs' fit only where nothing else refuses (memory, GPUs)
        return _fit_to_cpus(r) if r.caps.verdict.level != "refuse" else None
    total = r.caps.estimate.total
    for values, cost in _candidates(r, headroom):
        trial = r.with_values(values, "--fit")  # pragma: no mutate (a trial's origin is unread)
        if _fits(trial, headroom):
            return Fit(values, total, trial.caps.estimate.total, cost)
    return None


def why_nothing_fits(r: Resolved, headroom: float = HEADROOM, *, by: str = "--fit") -> str:
    """One sentence for a refusal that nothing tried avoids: what the smallest would need.
    `by`: what asked for the fit (--fit, or the profile's limits.fit)."""
    candidates = _candidates(r, headroom)
    if not candidates:
        return (f"{by}: nothing smaller to try ({r.framework}'s pools are at their smallest "
                f"here); {_need(r, headroom)}.")
    values, _ = candidates[-1]
    smallest = r.with_values(values, "--fit")  # pragma: no mutate (a trial's origin is unread)
    keys = ", ".join(f"{k} {_shown(k, v)}" for k, v in values.items())
    return f"{by}: nothing fits: even {keys} {_need(smallest, headroom)}."


def apply(r: Resolved, fit: Fit, origin: str = "--fit") -> Resolved:
    return r.with_values(fit.values, origin)


def _fits(r: Resolved, headroom: float) -> bool:
    return _pids_fit(r, headroom) and fits(_stacks(r), address_limits(r.facts))


def _fit_to_cpus(r: Resolved) -> Fit | None:
    """Processes whose pools take turns on too few CPUs (the verdict's oversubscribed line):
    each pool sized to its share of the CPUs. None where smaller pools would not help."""
    t, procs, cpus = r.caps.threads, r.caps.processes, r.caps.cpus
    pool, share = max(t["intra_op"], t["omp"]), max(1, cpus // procs)
    if procs < 2 or pool <= share:
        return None
    own_omp = r.profile.get("threads.omp", "auto") != "auto"  # else it follows intra_op
    values = {"threads.intra_op": share, **({"threads.omp": share} if own_omp else {})}
    trial = r.with_values(values, "--fit")  # pragma: no mutate (a trial's origin is unread)
    fits = (f"so {procs} processes x {share} fit the {cpus} CPUs" if procs * share <= cpus else
            f"the least a pool can be; {procs} processes still take turns on {cpus} CPUs "
            f"(--processes {cpus} would not)")
    return Fit(values, r.caps.estimate.total, trial.caps.estimate.total,
               f"its CPU pools shrink from {pool} to {share} threads, {fits}")


def _pids_fit(r: Resolved, headroom: float) -> bool:
    """The estimate takes at most `headroom` of the pids budget (none: it fits)."""
    avail, total = r.caps.budget.available, r.caps.estimate.total
    return avail is None or total <= headroom * avail


def _stacks(r: Resolved) -> Stacks:
    return r.caps.estimate.stacks


def _need(r: Resolved, headroom: float) -> str:
    """What the run would need: a pids budget, or address space for its stacks."""
    avail, total = r.caps.budget.available, r.caps.estimate.total
    if not _pids_fit(r, headroom):
        least = next(b for b in itertools.count(avail) if total <= headroom * b)
        return (f"needs ~{total} threads, above {headroom:.0%} of the budget {avail} "
                f"(a budget of at least {least})")
    s = _stacks(r)
    return (f"reserves {format_size(s.reserved)} of thread stacks, above half of "
            + " and ".join(f"{k.upper()} {format_size(v)}"
                           for k, v in address_limits(r.facts).items() if v))


def _candidates(r: Resolved, headroom: float) -> list[tuple[dict[str, Any], str]]:
    """Settings to try, the cheapest first: smaller stacks where stacks do not fit, then
    smaller pools, then (JAX) fewer CPUs."""
    out: list[tuple[dict[str, Any], str]] = []
    stacks, limits = _stacks(r), address_limits(r.facts)
    base: dict[str, Any] = {}  # the largest stack that fits, else the smallest tried
    if not fits(stacks, limits):
        for size in (s for s in FIT_SIZES if s < stacks.stack):
            omp = min(stacks.omp, size) if stacks.omp is not None else None
            base = {"limits.stack": size, **({"threads.omp_stack": omp}
                                             if omp is not None and omp < stacks.omp else {})}
            if fits(replace(stacks, stack=size, omp=omp), limits):
                break
        if base:
            out.append((base, f"thread stacks shrink from {format_size(stacks.stack)} to "
                              f"{format_size(base['limits.stack'])} (a thread recursing "
                              f"deeper crashes)"))
    now = r.caps.threads["intra_op"]
    bound = get_framework(r.framework).affinity_bound
    pools = "its CPU pools" + (f" ({bound})" if bound else "")
    out += [({**base, "threads.intra_op": n}, f"{pools} shrink from {now} to {n} threads "
                                              f"(CPU-bound work scales with them)")
            for n in reversed(range(1, now))]
    if bound:
        allowed = sorted(cpu_ids(r.profile.get("limits.cpuset") or r.facts.affinity_list or
                                 format_cpu_list(list(range(r.facts.affinity_cpus)))))
        out += [({**base, "limits.cpuset": format_cpu_list(allowed[:n])},
                 f"{r.framework}'s compute runs on {n} of the {len(allowed)} CPUs it could use")
                for n in reversed(range(1, len(allowed)))]
    return out


def _shown(key: str, value: Any) -> str:
    if key == "limits.cpuset":  # `limits.cpuset 0` read as no CPU at all
        return f"{value} (CPU{'s' if len(cpu_ids(str(value))) > 1 else ''} {value})"
    return format_size(value) if key in ("limits.stack", "threads.omp_stack") else str(value)
