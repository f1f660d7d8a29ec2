"""Fit a run into its pids budget instead of refusing it, as report 002's own fix did (it
capped the pools): the largest pool size whose estimated peak fits with headroom. JAX's pools
follow the CPUs it may use, so it gets fewer CPUs (a cpuset); the others get fewer threads."""

from __future__ import annotations

from dataclasses import dataclass

from launcher.caps.resolve import Resolved
from launcher.cpulist import cpu_ids, format_cpu_list

HEADROOM = 0.8  # the estimate at most this share of the budget: the verdict's own "ok"
AFFINITY_BOUND = ("jax",)  # frameworks no thread variable caps (jax#1539)


@dataclass(frozen=True)
class Fit:
    key: str  # the profile key set
    value: int | str
    was: int  # the estimated peak before, in all
    now: int  # and after
    cost: str  # one sentence

    def describe(self) -> str:
        return (f"{self.key} {self.value} (threads at the peak ~{self.was} -> ~{self.now}): "
                f"{self.cost}")


def fit_to_budget(r: Resolved, headroom: float = HEADROOM) -> Fit | None:
    """None when the estimate already fits, or when no pool size fits (the refusal stands)."""
    avail, total = r.caps.budget["available"], r.caps.estimate["total"]
    if avail is None or total <= headroom * avail:
        return None
    for key, value, cost in _candidates(r):
        trial = r.with_values({key: value}, "--fit").caps.estimate["total"]
        if trial <= headroom * avail:
            return Fit(key, value, total, trial, cost)
    return None


def why_nothing_fits(r: Resolved, headroom: float = HEADROOM) -> str:
    """One sentence for a refusal that no pool size avoids: the smallest fit's need."""
    avail = r.caps.budget["available"]
    candidates = _candidates(r)
    if not candidates:
        return (f"--fit: nothing smaller to try ({r.framework}'s pools are at their smallest "
                f"here); ~{r.caps.estimate['total']} threads need a budget of at least "
                f"{-(-r.caps.estimate['total'] * 10 // int(headroom * 10))}, and it is {avail}.")
    key, value, _ = candidates[-1]
    need = r.with_values({key: value}, "--fit").caps.estimate["total"]
    return (f"--fit: nothing fits: even {key} {value} needs ~{need} threads, above "
            f"{int(headroom * 100)}% of the budget {avail}.")


def apply(r: Resolved, fit: Fit, origin: str = "--fit") -> Resolved:
    return r.with_values({fit.key: fit.value}, origin)


def _candidates(r: Resolved) -> list[tuple[str, int | str, str]]:
    """Pool sizes from the largest below today's down to one, as (key, value, cost)."""
    label = r.framework
    if r.framework in AFFINITY_BOUND:
        allowed = sorted(cpu_ids(r.profile.get("limits.cpuset") or r.facts.affinity_list or
                                 f"0-{r.facts.affinity_cpus - 1}"))
        return [(
            "limits.cpuset", format_cpu_list(allowed[:n]),
            f"{label}'s compute runs on {n} of the {len(allowed)} CPUs it could use",
        ) for n in range(len(allowed) - 1, 0, -1)]
    now = r.caps.threads["intra_op"]
    return [("threads.intra_op", n, f"its CPU pools shrink from {now} to {n} threads (CPU-bound "
                                    f"work scales with them)")
            for n in range(now - 1, 0, -1)]
