"""(profile, host facts, framework, processes) -> Caps: the managed variables, ulimits and
limits, each with its source, then the thread estimate, the budget and the verdict from their
own modules. Pure: the host was read into HostFacts, the installed framework is passed in."""

from __future__ import annotations

import functools
from dataclasses import replace

from launcher.caps.budget import pids_budget
from launcher.caps.calibrated import calibrated
from launcher.caps.clamp import clamp_memory
from launcher.caps.gpus import one_per_process
from launcher.caps.model import (
    UNLIMITED_RLIMIT,
    Caps,
    Estimate,
    GpuPlan,
    Limit,
    Origin,
    Setting,
    Ulimit,
)
from launcher.caps.sizing import cpuset_count, pool_cpus
from launcher.caps.stacks import stacks_of
from launcher.caps.threads import ThreadEstimate
from launcher.caps.verdict import verdict
from launcher.defaults import NONE
from launcher.errors import ProfileError
from launcher.frameworks import get as get_framework
from launcher.frameworks import names as framework_names
from launcher.frameworks.base import NOT_HERE, Installed, Pools, Settings
from launcher.probe.host import HostFacts
from launcher.profiles.loader import Profile
from launcher.profiles.schema import AUTO, UNLIMITED
from launcher.units import format_size, kib
from launcher.variables import DEPRECATED, managed
from launcher.vendors import get as get_vendor
from launcher.vendors.base import GpuSelection


def _src(profile: Profile, key: str) -> str:
    return f"profile {key} ({profile.where(key)})"


def compute_caps(
    profile: Profile,
    facts: HostFacts,
    *,
    framework: str | None = None,
    processes: int | None = None,
    overrides: dict[str, str] | None = None,
    inherited: dict[str, str] | None = None,
    selection: GpuSelection | None = None,
    extra_threads: int = 0,
    gpus_per_process: int | None = None,
    installed: Installed = NOT_HERE,
    clamp: bool = False,
) -> Caps:
    """Resolve a profile against host facts (callers go through `caps.resolve.resolve`).

    `inherited` is the environment the workload would otherwise inherit (the shell's, or the
    base image's); `overrides` are explicit `--env` values, which win over everything;
    `selection` the GPUs chosen (default: the profile's, as `select_gpus` makes them);
    `extra_threads` the workload's own besides its framework processes (a driver, a sampler);
    `gpus_per_process` the GPUs each process sees when the launcher narrows them (a job's
    chunk sees one), else every selected GPU; `installed` the framework's version and build
    where it runs (unknown: the thread model errs high); `clamp` the run starts on this host,
    so a memory limit above its memory is lowered to it (before the verdict budgets with it).
    """
    fw = framework or profile.get("framework", NONE)
    procs = processes or profile.get("workers.processes", 1)
    if procs < 1:
        raise ProfileError(f"--processes must be at least 1 (got {procs})")
    get = profile.get

    cpus, cpu_why = pool_cpus(fw, facts, get("limits.cpus", AUTO), get("limits.cpuset"))

    def pick(key: str, auto_value: int, auto_why: str) -> tuple[int, str]:
        v = get(key, AUTO)
        return (auto_value, f"auto: {auto_why}") if v == AUTO else (v, _src(profile, key))

    per_proc = max(1, cpus // procs)
    share = f"{cpus} CPUs ({cpu_why})" + (f" / {procs} processes" if procs > 1 else "")
    intra, intra_src = pick("threads.intra_op", per_proc, share)
    same = f"= intra_op {intra} <- {intra_src}"
    inter, inter_src = pick("threads.inter_op", min(2, intra), f"min(2, intra_op {intra})")
    omp, omp_src = pick("threads.omp", intra, same)
    limit, limit_src = pick("threads.omp_thread_limit", omp, f"= OMP threads {omp}")
    blas = omp

    want: dict[str, tuple[str | None, str]] = {
        "OMP_NUM_THREADS": (str(omp), omp_src),
        "MKL_NUM_THREADS": (str(omp), omp_src),
        "OPENBLAS_NUM_THREADS": (str(blas), omp_src),
        "GOTO_NUM_THREADS": (str(blas), omp_src),
        "NUMEXPR_MAX_THREADS": (str(omp), omp_src),
        "NUMEXPR_NUM_THREADS": (str(omp), omp_src),
        "OMP_THREAD_LIMIT": (str(limit), limit_src),
        "OMP_NESTED": (None, "deprecated (use OMP_MAX_ACTIVE_LEVELS)"),
    }
    # No XLA_FLAGS: measured here, --xla_cpu_multi_thread_eigen=false leaves JAX's thread count
    # unchanged (jax#1539) and costs ~12% of matmul throughput at 1-1.5 CPUs of quota.
    for key, var in workload_variables().items():  # what the workloads read, from their keys
        if get(key) is not None:
            want[var] = (str(get(key)), _src(profile, key))
    if get("threads.omp_stack") is not None:
        stack = kib(get("threads.omp_stack"))
        want["OMP_STACKSIZE"] = (stack, _src(profile, "threads.omp_stack"))
        want["GOMP_STACKSIZE"] = (stack, _src(profile, "threads.omp_stack"))
    if get("threads.max_active_levels") is not None:
        want["OMP_MAX_ACTIVE_LEVELS"] = (str(get("threads.max_active_levels")),
                                         _src(profile, "threads.max_active_levels"))
    if selection is None:
        from launcher.caps.gpus import select_gpus

        selection = select_gpus(profile, facts, None)
    # every framework's own variables (a workload may import several), its allocator's too
    pools = Pools(intra=intra, intra_src=intra_src, inter=inter, inter_src=inter_src, pick=pick,
                  get=get, src=functools.partial(_src, profile),
                  gpu_build=get_vendor(selection.vendor).gpu_build)
    frameworks = [get_framework(n) for n in framework_names()]
    for each in frameworks:
        want.update(each.environment(pools))
    _vendor_env(profile, selection, want)

    inherited = inherited or {}
    env = _settle(want, profile, overrides or {}, inherited)
    ulimits = _ulimits(profile)
    limits = _limits(profile, facts)
    if clamp:
        clamp_memory(limits, facts)
    # pools are capped by affinity (the profile's cpuset narrows it), not by the quota
    fw_cpus = min(facts.affinity_cpus, cpuset_count(get("limits.cpuset")) or facts.affinity_cpus)
    base = Settings(omp=env_int(env, "OMP_NUM_THREADS", omp),
                    blas=env_int(env, "OPENBLAS_NUM_THREADS", blas), intra=intra, inter=inter)
    # what each framework's variables feed back, where they hold a number (else its default)
    settings = base.updated({name: n for each in frameworks
                             for name, var in each.settings_from.items()
                             for n in (env_number(env, var),) if n is not None})
    by_layout = gpus_per_process is None and one_per_process(procs, selection.count)
    if by_layout:
        gpus_per_process = 1
    seen = selection.count if gpus_per_process is None else min(gpus_per_process, selection.count)
    gpu = _gpu(profile, facts, selection, per_process=seen, by_layout=by_layout)
    est = calibrated(fw, settings, cpus=fw_cpus, gpus=seen, facts=facts, installed=installed)
    if get("workers.threads") is not None:  # this workload's own peak, measured
        measured = get("workers.threads")
        est = ThreadEstimate(measured, {"measured": measured},
                             f"measured: {_src(profile, 'workers.threads')}")
    total = procs * est.per_process + 1 + extra_threads  # + the supervisor, + the workload's
    budget = pids_budget(limits, ulimits, facts)
    if by_layout:
        budget = replace(budget, notes=(*budget.notes,
            f"each process is budgeted for the {seen} GPU it sees of the {selection.count}: "
            f"the profile runs a process per GPU ({procs} processes), as `render` gives each "
            f"service and `jobs` each chunk its own; one process in a single `run` sees all "
            f"{selection.count} unless it narrows CUDA_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES"))
    stack_soft = (ulimits["stack"].soft if "stack" in ulimits else
                  facts.rlimits["stack"].soft if "stack" in facts.rlimits else None)
    stacks = stacks_of(est.per_process, est.breakdown, stack_soft,
                       {k: s.value for k, s in env.items() if s.value is not None}, fw_cpus,
                       omp_parts=get_framework(fw).omp_parts)
    said = verdict(profile, facts=facts, fw=fw, procs=procs, est=est, total=total, budget=budget,
                   limits=limits, gpu=gpu, inherited=inherited, stacks=stacks,
                   pool=max(settings.intra, settings.omp), cpus=cpus)
    return Caps(
        profile=profile.name,
        framework=fw,
        processes=procs,
        cpus=cpus,
        threads={"intra_op": intra, "inter_op": inter, "omp": omp, "blas": blas},
        env=env,
        ulimits=ulimits,
        limits=limits,
        gpu=gpu,
        estimate=Estimate(per_process=est.per_process, breakdown=est.breakdown,
                          processes=procs, extra=extra_threads, total=total,
                          source=est.source, stacks=stacks),
        budget=budget,
        verdict=said,
    )


def env_int(env: dict[str, Setting], key: str, default: int) -> int:
    n = env_number(env, key)
    return default if n is None else n


def env_number(env: dict[str, Setting], key: str) -> int | None:
    """A variable's value as a whole number; None where it is unset or not one."""
    s = env.get(key)
    try:
        return int(s.value) if s and s.value is not None else None
    except ValueError:
        return None


def _gpu(profile: Profile, facts: HostFacts, selection: GpuSelection, *, per_process: int,
         by_layout: bool) -> GpuPlan:
    found = [g for g in facts.gpus if g.vendor == selection.vendor]
    return GpuPlan(vendor=selection.vendor, count=selection.count, found=len(found),
                   model=profile.get("gpu.model"), gfx_version=profile.get("gpu.gfx_version"),
                   per_process=per_process, by_layout=by_layout)


def _vendor_env(profile: Profile, selection: GpuSelection, want: dict) -> None:
    """The vendor's variables for the selection, each with the profile key it comes from."""
    vendor = get_vendor(selection.vendor)
    sources = vendor.sources()
    for name, value in vendor.environment(selection, profile.get("gpu", {})).items():
        key, _, fallback = sources.get(name, "").partition("|")
        given = key and profile.get(key) is not None
        want[name] = (value, _src(profile, key) if given or not fallback else fallback)


def _settle(want: dict[str, tuple[str | None, str]], profile: Profile,
            overrides: dict[str, str], inherited: dict[str, str]) -> dict[str, Setting]:
    """Apply precedence: --env > profile env > computed; note every inherited value replaced."""
    out: dict[str, Setting] = {}
    managed_names = managed()
    for name, (value, source) in want.items():
        if value is None and name not in inherited:
            continue  # nothing to remove
        out[name] = Setting(value, source)
    for name, value in profile.get("env", {}).items():
        out[name] = Setting(value, f"profile env.{name} ({profile.where('env.' + name)})",
                            origin=Origin.PROFILE)
    for name, value in overrides.items():
        out[name] = Setting(value, "--env (explicit override)", origin=Origin.OVERRIDE)
    for name, old in inherited.items():
        if name in out:
            if out[name].value != old:
                out[name].replaced = old
        elif name in managed_names:
            out[name] = Setting(old, "inherited (this profile does not set it)",
                                origin=Origin.INHERITED)
    # A deprecated variable's value moves to its successor unless that is set.
    for old_name, new_name in DEPRECATED.items():
        if old_name in inherited and new_name not in out and old_name not in overrides:
            out[new_name] = Setting(inherited[old_name], f"renamed from inherited {old_name}",
                                    origin=Origin.INHERITED)
    return dict(sorted(out.items()))


def _size_ulimit(profile: Profile, key: str, hard_unlimited: bool) -> Ulimit | None:
    v = profile.get(key, AUTO)
    if v == AUTO:
        return None
    if v == UNLIMITED:
        return Ulimit(UNLIMITED_RLIMIT, UNLIMITED_RLIMIT, _src(profile, key))
    return Ulimit(v, UNLIMITED_RLIMIT if hard_unlimited else v, _src(profile, key))


def _ulimits(profile: Profile) -> dict[str, Ulimit]:
    out: dict[str, Ulimit] = {}
    for name, hard_unlimited in (("nproc", False), ("nofile", False), ("stack", True),
                                 ("memlock", False)):
        u = _size_ulimit(profile, f"limits.{name}", hard_unlimited)
        if u is not None:
            out[name] = u
    return out


def _limits(profile: Profile, facts: HostFacts) -> dict[str, Limit]:
    pids = profile.get("limits.pids", AUTO)
    out = {
        "pids": Limit(pids, _src(profile, "limits.pids")) if isinstance(pids, int)
        else Limit(None, "auto: the cgroup's own pids.max applies", Origin.AUTO) if pids == AUTO
        else Limit(None, _src(profile, "limits.pids")),
        "shm": Limit(profile.get("limits.shm"), _src(profile, "limits.shm"))
        if profile.get("limits.shm") else Limit(None, "engine default", Origin.DEFAULT),
    }
    cpus = profile.get("limits.cpus", AUTO)
    out["cpus"] = (Limit(cpus, _src(profile, "limits.cpus")) if cpus != AUTO
                   else Limit(None, "auto: the cgroup's own CPU quota applies", Origin.AUTO))
    cpuset = profile.get("limits.cpuset")
    out["cpuset"] = (Limit(cpuset, _src(profile, "limits.cpuset")) if cpuset
                     else Limit(None, "all the CPUs of the affinity", Origin.DEFAULT))
    mem = profile.get("limits.memory", AUTO)
    if mem != AUTO:
        out["memory"] = Limit(mem, _src(profile, "limits.memory"))
    else:
        hw = profile.get("hardware.memory", AUTO)
        reserved = profile.get("hardware.reserved_memory", 0)
        total = hw if hw != AUTO else facts.host_memory()
        if reserved and total:
            where = ("profile hardware.memory" if hw != AUTO else "host memory")
            out["memory"] = Limit(max(0, total - reserved),
                                  f"auto: {where} {format_size(total)} - hardware.reserved_memory "
                                  f"{format_size(reserved)}", Origin.AUTO)
        else:
            out["memory"] = Limit(None, "auto: the cgroup's own memory limit applies",
                                  Origin.AUTO)
    return out


def workload_variables() -> dict[str, str]:
    """Profile key -> the variable a registered workload reads it from (`from_keys`)."""
    from launcher.profiles.schema import workloads

    return {key: var for w in workloads() for key, var in w.from_keys.items()}
