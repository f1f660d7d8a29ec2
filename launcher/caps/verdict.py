"""The verdict: ok, warn or refuse, with one sentence for each reason."""

from __future__ import annotations

from collections.abc import Iterable

from launcher.caps.budget import memory_budget
from launcher.caps.model import Budget, GpuPlan, Limit, Origin, Reason, Verdict, Why, threads_in_all
from launcher.caps.stacks import Stacks, stack_reasons
from launcher.caps.threads import ThreadEstimate
from launcher.checks import CheckInput
from launcher.frameworks import get as get_framework
from launcher.probe.host import HostFacts
from launcher.profiles.loader import Profile
from launcher.profiles.schema import workloads
from launcher.units import format_size
from launcher.variables import DEPRECATED
from launcher.vendors import get as get_vendor


def verdict(profile: Profile, *, facts: HostFacts, fw: str, procs: int, est: ThreadEstimate,
             total: int, budget: Budget, limits: dict[str, Limit],
             gpu: GpuPlan, inherited: dict[str, str], stacks: Stacks,
             pool: int = 1, cpus: int | None = None) -> Verdict:
    """`pool`: the threads one process's largest compute pool runs; `cpus`: the CPUs the
    pools were sized for (processes x pool above them: oversubscribed)."""
    said: list[tuple[str, Reason]] = []

    def say(level: str, kind: Why, text: str) -> None:
        said.append((level, Reason(kind, text)))

    cpuset = limits["cpuset"].value
    if cpuset and facts.affinity_list:
        from launcher.cpulist import cpu_ids

        wanted, allowed = cpu_ids(cpuset), cpu_ids(facts.affinity_list)
        if wanted - allowed:
            what = ("a run here fails" if not wanted & allowed else
                    f"a run here gets only {len(wanted & allowed)} of them")
            say("warn", Why.CPUSET, f"limits.cpuset {cpuset} names CPUs this host does not let "
                                    f"the workload run on (its affinity is "
                                    f"{facts.affinity_list}): {what}.")
    avail = budget.available
    desc = threads_in_all({"total": total, "per_process": est.per_process, "processes": procs,
                           "extra": total - procs * est.per_process - 1})
    if avail is not None:
        if total > avail:
            say("refuse", Why.PIDS, f"{desc} would exceed the {budget.binding}.")
        elif total > 0.8 * avail:
            say("warn", Why.PIDS,
                f"{desc} would use {total * 100 // avail}% of the {budget.binding}.")
    if cpus and procs > 1 and pool > max(1, cpus // procs):  # smaller pools would help
        say("warn", Why.OVERSUBSCRIBED, oversubscribed(procs, pool, cpus))
    per_mem = profile.get("workers.memory")
    mem_budget = memory_budget(profile, limits, facts)
    if per_mem and mem_budget:
        need = procs * per_mem
        fits = mem_budget // per_mem
        each = f"{procs} {_processes(procs)} x {format_size(per_mem)} = {format_size(need)}"
        if need > mem_budget:
            say("refuse", Why.MEMORY, f"{each} exceed the {format_size(mem_budget)} memory budget; "
                          f"at most {fits} fit.")
        elif need > 0.9 * mem_budget:
            say("warn", Why.MEMORY, f"{each} use {need * 100 // mem_budget}% of the "
                        f"{format_size(mem_budget)} memory budget; the OOM killer may take "
                        f"workers.")
    if gpu.count > gpu.found:
        label = get_vendor(gpu.vendor).label
        say("warn", Why.GPU_SHORT, f"the profile asks for {gpu.count} {label} GPU(s) and "
                                   f"this host shows {gpu.found}; use --gpus none to run on "
                                   f"the CPU.")
    asked = CheckInput(profile, facts, gpu.count)
    for kind, checks in ((Why.FRAMEWORK, get_framework(fw).checks),
                         (Why.VENDOR, get_vendor(gpu.vendor).checks if gpu.count else ()),
                         *((Why.WORKLOAD, w.checks) for w in workloads())):
        for check in checks:
            for level, reason in check(asked):
                say(level, kind, reason)
    for level, reason in stack_reasons(stacks, address_limits(facts)):
        say(level, Why.STACKS, reason)
    for reason in above_outer(limits, facts):
        say("warn", Why.ABOVE_OUTER, reason)
    for name, value in sorted(inherited.items()):
        if name in DEPRECATED:
            say("warn", Why.DEPRECATED, f"{name}={value} is deprecated; launcher removes it "
                        f"(use {DEPRECATED[name]}).")
    return Verdict(_level(level for level, _ in said), tuple(r for _, r in said))


def _level(levels: Iterable[str]) -> str:
    """The gravest level said: refuse over warn over ok."""
    seen = set(levels)
    return "refuse" if "refuse" in seen else "warn" if "warn" in seen else "ok"


def oversubscribed(procs: int, pool: int, cpus: int) -> str:
    """Compute threads that take turns on too few CPUs: each runs a share of the time, and
    the pool's synchronisation waits for the slowest."""
    fits = max(1, cpus // procs)
    return (f"{procs} {_processes(procs)} x {pool} compute threads = {procs * pool} on {cpus} "
            f"CPU(s): oversubscribed {procs * pool / cpus:g}x, so they take turns; `--fit` "
            f"sizes each pool {fits} (threads.intra_op {fits}).")


def _processes(n: int) -> str:
    return "process" if n == 1 else "processes"


def above_outer(limits: dict[str, Limit], facts: HostFacts) -> list[str]:
    """A limit asked for above one the workload is already under (its cgroup or an ancestor):
    the outer one binds, as a ulimit above the hard limit is lowered."""
    cg = facts.cgroup
    out = []
    for cap, outer, file in (("pids", cg.pids_max, "pids.max"),
                             ("memory", cg.memory_limit, "memory limit"),
                             ("cpus", cg.cpu_quota, "CPU quota")):
        asked = limits[cap].value if cap in limits else None
        if (not isinstance(asked, (int, float)) or outer is None or asked <= outer
                or limits[cap].origin is Origin.AUTO):  # asked for, not derived
            continue
        at = cg.limited_at(cap)
        where = facts.host_path(at) if at else None
        shown = (lambda v: format_size(int(v))) if cap == "memory" else (
            lambda v: str(int(v)) if float(v).is_integer() else f"{v:g}")
        out.append(f"limits.{cap} {shown(asked)} is above the {file} {shown(outer)}"
                   f"{f' of {where}' if where else ''}, which binds: the run gets at most "
                   f"{shown(outer)}.")
    return out


def address_limits(facts: HostFacts) -> dict[str, int | None]:
    """The soft RLIMIT_AS and RLIMIT_DATA the workload starts under (None: unlimited)."""
    return {name: facts.rlimits[name].soft if name in facts.rlimits else None
            for name in ("as", "data")}
