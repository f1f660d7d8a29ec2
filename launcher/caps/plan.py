"""The pure budget: (profile, host facts, framework, processes) -> Caps.

No I/O here. Every value carries its source so `plan` and the entrypoint can explain it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from launcher.caps.threads import ThreadEstimate, estimate_threads
from launcher.errors import ProfileError
from launcher.frameworks import get as get_framework
from launcher.frameworks.base import NOT_HERE, Installed, Settings
from launcher.probe.cgroup import effective_cpus
from launcher.probe.host import HostFacts
from launcher.profiles.loader import Profile
from launcher.profiles.schema import AUTO, UNLIMITED
from launcher.units import format_size, kib
from launcher.variables import DEPRECATED, managed
from launcher.vendors import get as get_vendor
from launcher.vendors.base import GpuSelection

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
    cpus: int  # CPUs each process's pools are sized for in total
    threads: dict[str, int]  # intra, inter, omp, blas
    env: dict[str, Setting]
    ulimits: dict[str, Ulimit]
    limits: dict[str, Limit]  # pids, memory, shm, cpus (container-wide)
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


def _src(profile: Profile, key: str) -> str:
    return f"profile {key} ({profile.where(key)})"


def compute_caps(
    profile: Profile,
    facts: HostFacts,
    framework: str | None = None,
    processes: int | None = None,
    overrides: dict[str, str] | None = None,
    inherited: dict[str, str] | None = None,
    selection: GpuSelection | None = None,
    extra_threads: int = 0,
    gpus_per_process: int | None = None,
    installed: Installed = NOT_HERE,
) -> Caps:
    """Resolve a profile against host facts (callers go through `caps.resolve.resolve`).

    `inherited` is the environment the workload would otherwise inherit (the shell's, or the
    base image's); `overrides` are explicit `--env` values, which win over everything;
    `selection` the GPUs chosen (default: the profile's, as `select_gpus` makes them);
    `extra_threads` the workload's own besides its framework processes (a driver, a sampler);
    `gpus_per_process` the GPUs each process sees when the launcher narrows them (a job's
    chunk sees one), else every selected GPU; `installed` the framework's version and build
    where it runs (unknown: the thread model errs high).
    """
    fw = framework or profile.get("framework", "none")
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
    data_par, data_src = pick("threads.data_parallelism", intra, same)
    private, private_src = pick("threads.private_threadpool_size", intra, same)
    prefetch, prefetch_src = pick("threads.prefetch", 2, "2 batches")
    blas = omp

    want: dict[str, tuple[str | None, str]] = {
        "OMP_NUM_THREADS": (str(omp), omp_src),
        "MKL_NUM_THREADS": (str(omp), omp_src),
        "OPENBLAS_NUM_THREADS": (str(blas), omp_src),
        "GOTO_NUM_THREADS": (str(blas), omp_src),
        "NUMEXPR_MAX_THREADS": (str(omp), omp_src),
        "NUMEXPR_NUM_THREADS": (str(omp), omp_src),
        "TF_NUM_INTRAOP_THREADS": (str(intra), intra_src),
        "TF_NUM_INTEROP_THREADS": (str(inter), inter_src),
        "OMP_THREAD_LIMIT": (str(limit), limit_src),
        "LAUNCHER_TF_DATA_PARALLELISM": (str(data_par), data_src),
        "LAUNCHER_TF_DATA_PREFETCH": (str(prefetch), prefetch_src),
        "LAUNCHER_TF_DATA_PRIVATE_THREADPOOL": (str(private), private_src),
        "OMP_NESTED": (None, "deprecated (use OMP_MAX_ACTIVE_LEVELS)"),
        "XLA_PYTHON_CLIENT_MEM_FRACTION": (None, "deprecated (use XLA_CLIENT_MEM_FRACTION)"),
    }
    # No XLA_FLAGS: measured here, --xla_cpu_multi_thread_eigen=false leaves JAX's thread count
    # unchanged (jax#1539) and costs ~12% of matmul throughput at 1-1.5 CPUs of quota.
    for key, var in (("recommended.num_envs", "LAUNCHER_NUM_ENVS"),
                     ("recommended.vectorized_envs", "LAUNCHER_VECTORIZED_ENVS"),
                     ("recommended.batch_size", "LAUNCHER_BATCH_SIZE")):
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
    gpu = _gpu(profile, facts, selection)
    _allocator(profile, selection, want)
    _vendor_env(profile, selection, want)

    inherited = inherited or {}
    env = _settle(want, profile, overrides or {}, inherited)
    ulimits = _ulimits(profile)
    limits = _limits(profile, facts)
    # pools are capped by affinity (the profile's cpuset narrows it), not by the quota
    fw_cpus = min(facts.affinity_cpus, cpuset_count(get("limits.cpuset")) or facts.affinity_cpus)
    settings = Settings(omp=env_int(env, "OMP_NUM_THREADS", omp),
                        blas=env_int(env, "OPENBLAS_NUM_THREADS", blas),
                        intra=env_int(env, "TF_NUM_INTRAOP_THREADS", intra),
                        inter=env_int(env, "TF_NUM_INTEROP_THREADS", inter),
                        private_pool=env_int(env, "LAUNCHER_TF_DATA_PRIVATE_THREADPOOL", private))
    seen = selection.count if gpus_per_process is None else min(gpus_per_process, selection.count)
    est = calibrated(fw, settings, fw_cpus, seen, facts, installed)
    total = procs * est.per_process + 1 + extra_threads  # + the supervisor, + the workload's
    budget = _pids_budget(limits, ulimits, facts)
    verdict = _verdict(profile, facts, fw, procs, est, total, budget, limits, gpu, inherited)
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
        estimate={"per_process": est.per_process, "breakdown": est.breakdown,
                  "processes": procs, "extra": extra_threads, "total": total,
                  "source": est.source},
        budget=budget,
        verdict=verdict,
    )


def fit_rlimit(soft: int, hard: int, ceiling: int | None) -> tuple[int, int]:
    """A (soft, hard) pair (-1 = unlimited) lowered to fit under `ceiling` (None = unlimited):
    what an unprivileged process, or a daemon without CAP_SYS_RESOURCE, can set."""
    if ceiling is None:
        return soft, hard
    hard = ceiling if hard < 0 else min(hard, ceiling)
    return (hard if soft < 0 else min(soft, hard)), hard


def clamp_ulimits(caps: Caps, facts: HostFacts) -> Caps:
    """Lower ulimits to the hard limits in `facts` (this host's, or inside a container its
    own): the one clamp for `launcher run`, the native runtime and the supervisor."""
    for name, u in caps.ulimits.items():
        host = facts.rlimits.get(name)
        if host is None or host.hard is None:
            continue
        soft, hard = fit_rlimit(u.soft, u.hard, host.hard)
        if (soft, hard) != (u.soft, u.hard):
            shown = format_size(host.hard) if name in ("stack", "memlock") else host.hard
            caps.ulimits[name] = Ulimit(soft, hard, f"{u.source}, lowered to this host's hard "
                                                    f"limit {shown} (only a privileged process "
                                                    f"can raise a hard limit)")
    return caps


def calibrated(framework: str, settings: Settings, cpus: int, gpus: int, facts: HostFacts,
               installed: Installed = NOT_HERE) -> ThreadEstimate:
    """The built-in model, corrected by this host's calibration when one was measured for this
    framework, its installed version and this many CPUs: the measured peak minus the model at
    the settings it was measured under is added to the model at these settings. The CPU side
    (measured with no GPU visible) moves the estimate either way; a GPU-side measurement only
    raises the GPU terms, never lowers them: the probe's few steps do not start every pool a
    GPU workload grows (jax's compile pool, its async work runner)."""
    model = estimate_threads(framework, settings, cpus, gpus, installed)
    entries = [e for e in facts.calibration if e.get("framework") == framework and
               e.get("cpus") == cpus]
    if not entries:
        return model
    from launcher.probe.calibration import user_path

    # An image's calibration was measured with the framework it holds, and where the version
    # cannot be read (a fixture root, the supervisor's isolated interpreter) none is refused.
    version, mine = installed.version, str(user_path())
    fits = [(e.get("file") == mine, e.get("date", ""), i, e) for i, e in enumerate(entries)
            if version is None or e.get("version") == version or e.get("file") != mine]
    if not fits:
        return ThreadEstimate(model.per_process, model.breakdown,
                              f"{model.source}; the calibration is for {framework} "
                              f"{entries[0].get('version')}, installed {version}")

    def newest(on_gpu: bool) -> dict[str, Any] | None:
        side = [f for f in fits if bool(f[3].get("gpus", 0)) == on_gpu]
        return max(side, key=lambda f: f[:3])[3] if side else None  # this host's, the newest

    def offset(entry: dict[str, Any], seen: int) -> int:
        at = estimate_threads(framework, Settings.of(entry.get("settings", {})), cpus, seen,
                              installed)
        return int(entry["peak"]) - at.per_process

    parts, said = dict(model.breakdown), []
    cpu_side = newest(on_gpu=False)
    cpu_offset = offset(cpu_side, 0) if cpu_side else 0
    if cpu_side:
        parts["calibration"] = cpu_offset
        said.append(f"calibrated on this host, {framework} {cpu_side.get('version')}, "
                    f"{cpu_side.get('date', '?')}")
    gpu_side = newest(on_gpu=True) if gpus else None
    if gpu_side:
        raise_by = max(0, offset(gpu_side, int(gpu_side.get("gpus", 1))) - cpu_offset)
        parts["gpu calibration"] = raise_by
        said.append(f"{'calibrated on this host' if not said else 'GPU side'} with "
                    f"{gpu_side.get('gpus')} {gpu_side.get('vendor', '')} GPU "
                    f"(driver {gpu_side.get('driver', '?')}), {gpu_side.get('date', '?')}")
    if not said:  # only a GPU-side measurement, and this run sees no GPU
        return model
    parts = {k: v for k, v in parts.items() if v or k == "main"}
    return ThreadEstimate(sum(parts.values()), parts, "; ".join(said))


def env_int(env: dict[str, Setting], key: str, default: int) -> int:
    s = env.get(key)
    try:
        return int(s.value) if s and s.value is not None else default
    except ValueError:
        return default


def cpuset_count(cpuset: str | None) -> int | None:
    from launcher.probe.cgroup import parse_cpu_list

    return parse_cpu_list(cpuset) if cpuset else None


def pool_cpus(framework: str, facts: HostFacts, cpu_limit: float | str,
              cpuset: str | None = None) -> tuple[int, str]:
    """CPUs the thread pools are sized for: min(affinity, cpuset, the quota rounded for the
    framework), at least 1. The quota is the profile's limits.cpus, else the cgroup's; the
    cpuset the cgroup's, narrowed by the profile's limits.cpuset."""
    quota = cpu_limit if cpu_limit != AUTO else facts.cgroup.cpu_quota
    rounding = rounding_for(framework)
    parts = [f"affinity {facts.affinity_cpus}"]
    sets = [n for n in (facts.cgroup.cpuset_cpus, cpuset_count(cpuset)) if n]
    if facts.cgroup.cpuset_cpus:
        parts.append(f"cpuset {facts.cgroup.cpuset_cpus}")
    if cpuset:
        parts.append(f"limits.cpuset {cpuset}")
    if quota is not None:
        src = "limits.cpus" if cpu_limit != AUTO else "quota"
        parts.append(f"{src} {float(quota):g} rounded {rounding.replace('-', ' ')}")
    why = "min of " + ", ".join(parts) if len(parts) > 1 else parts[0]
    cpus = effective_cpus(facts.affinity_cpus, min(sets) if sets else None,
                          float(quota) if quota is not None else None, rounding)
    return cpus, why


def rounding_for(framework: str) -> str:
    """How a fractional CPU quota rounds for a framework's pools. Half up where idle workers
    block soon (measured: torch at 1.5 CPUs, 1,700 matmuls/s with 2 threads against 1,380 with
    1); down where they spin (OpenBLAS: 930 against 1,330), as automaxprocs rounds."""
    return get_framework(framework).rounding


def _gpu(profile: Profile, facts: HostFacts, selection: GpuSelection) -> dict[str, Any]:
    vendor = selection.vendor
    count = selection.count
    found = [g for g in facts.gpus if g.vendor == vendor] if vendor != "none" else []
    return {"vendor": vendor, "count": count, "found": len(found),
            "model": profile.get("gpu.model"), "gfx_version": profile.get("gpu.gfx_version")}


def _allocator(profile: Profile, selection: GpuSelection, want: dict) -> None:
    conf = profile.get("allocator.torch")  # validated by the loader
    if conf is not None:
        src = _src(profile, "allocator.torch")
        for name in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF",
                     *get_vendor(selection.vendor).torch_alloc_variables):
            want[name] = (conf, src)
    pre = profile.get("allocator.xla_preallocate")
    if pre is not None:
        want["XLA_PYTHON_CLIENT_PREALLOCATE"] = (
            "true" if pre else "false", _src(profile, "allocator.xla_preallocate"))
    frac = profile.get("allocator.xla_mem_fraction")
    if frac is not None:
        want["XLA_CLIENT_MEM_FRACTION"] = (f"{frac:g}", _src(profile, "allocator.xla_mem_fraction"))
    alloc = profile.get("allocator.xla_allocator")
    if alloc is not None:
        want["XLA_PYTHON_CLIENT_ALLOCATOR"] = (alloc, _src(profile, "allocator.xla_allocator"))


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
        out[name] = Setting(value, f"profile env.{name} ({profile.where('env.' + name)})")
    for name, value in overrides.items():
        out[name] = Setting(value, "--env (explicit override)")
    for name, old in inherited.items():
        if name in out:
            if out[name].value != old:
                out[name].replaced = old
        elif name in managed_names:
            out[name] = Setting(old, "inherited (this profile does not set it)")
    # A deprecated variable's value moves to its successor unless that is set.
    for old_name, new_name in DEPRECATED.items():
        if old_name in inherited and new_name not in out and old_name not in overrides:
            out[new_name] = Setting(inherited[old_name], f"renamed from inherited {old_name}")
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
        else Limit(None, "auto: the cgroup's own pids.max applies" if pids == AUTO
                   else _src(profile, "limits.pids")),
        "shm": Limit(profile.get("limits.shm"), _src(profile, "limits.shm"))
        if profile.get("limits.shm") else Limit(None, "engine default"),
    }
    cpus = profile.get("limits.cpus", AUTO)
    out["cpus"] = (Limit(cpus, _src(profile, "limits.cpus")) if cpus != AUTO
                   else Limit(None, "auto: the cgroup's own CPU quota applies"))
    cpuset = profile.get("limits.cpuset")
    out["cpuset"] = (Limit(cpuset, _src(profile, "limits.cpuset")) if cpuset
                     else Limit(None, "all the CPUs of the affinity"))
    mem = profile.get("limits.memory", AUTO)
    if mem != AUTO:
        out["memory"] = Limit(mem, _src(profile, "limits.memory"))
    else:
        hw = profile.get("hardware.memory", AUTO)
        reserved = profile.get("hardware.reserved_memory", 0)
        total = hw if hw != AUTO else facts.memory_budget()
        if reserved and total:
            where = ("profile hardware.memory" if hw != AUTO else "host memory")
            out["memory"] = Limit(max(0, total - reserved),
                                  f"auto: {where} {format_size(total)} - hardware.reserved_memory "
                                  f"{format_size(reserved)}")
        else:
            out["memory"] = Limit(None, "auto: the cgroup's own memory limit applies")
    return out


def _pids_budget(limits: dict[str, Limit], ulimits: dict[str, Ulimit],
                 facts: HostFacts) -> dict[str, Any]:
    """Tasks available to the workload, and which limit gives the fewest."""
    cands: list[tuple[int, str]] = []
    if limits["pids"].value:
        cands.append((int(limits["pids"].value), f"pids limit {limits['pids'].value}"))
    cg = facts.cgroup
    if cg.pids_max is not None:
        cands.append((cg.pids_max - (cg.pids_current or 0),
                      f"pids.max {cg.pids_max} (pids.current {cg.pids_current or 0})"))
    nproc = ulimits.get("nproc")
    soft = nproc.soft if nproc else (facts.rlimits["nproc"].soft if "nproc" in facts.rlimits
                                     else None)
    if soft is not None and soft > 0:
        cands.append((soft - facts.uid_tasks,
                      f"RLIMIT_NPROC {soft} ({facts.uid_tasks} tasks of UID {facts.uid} running)"))
    if facts.threads_max:
        cands.append((facts.threads_max, f"kernel.threads-max {facts.threads_max}"))
    if facts.pid_max:
        cands.append((facts.pid_max, f"kernel.pid_max {facts.pid_max}"))
    if not cands:
        return {"available": None, "binding": "no limit found"}
    avail, why = min(cands)
    return {"available": avail, "binding": why}


def memory_budget(profile: Profile, limits: dict[str, Limit], facts: HostFacts) -> int | None:
    """What the workload's processes share: the memory limit, else the smaller of the profile's
    hardware.memory (the target's RAM) and this host's (its cgroup's limit, or its RAM)."""
    hw = profile.get("hardware.memory", AUTO)
    host = facts.memory_budget()
    if limits["memory"].value:
        return int(limits["memory"].value)
    if hw != AUTO:
        return min(hw, host) if host else int(hw)
    return host


def _verdict(profile: Profile, facts: HostFacts, fw: str, procs: int, est: ThreadEstimate,
             total: int, budget: dict[str, Any], limits: dict[str, Limit],
             gpu: dict[str, Any], inherited: dict[str, str]) -> Verdict:
    v = Verdict("ok")

    def say(level: str, reason: str) -> None:
        if level == "refuse" or (level == "warn" and v.level == "ok"):
            v.level = level
        v.reasons.append(reason)

    cpuset = limits["cpuset"].value
    if cpuset and facts.affinity_list:
        from launcher.cpulist import cpu_ids

        wanted, allowed = cpu_ids(cpuset), cpu_ids(facts.affinity_list)
        if wanted - allowed:
            what = ("a run here fails" if not wanted & allowed else
                    f"a run here gets only {len(wanted & allowed)} of them")
            say("warn", f"limits.cpuset {cpuset} names CPUs this host does not let the workload "
                        f"run on (its affinity is {facts.affinity_list}): {what}.")
    avail = budget["available"]
    each = f"~{est.per_process:,} thread{'' if est.per_process == 1 else 's'}"
    desc = f"{procs} processes x {each}" if procs > 1 else each
    if avail is not None:
        if total > avail:
            say("refuse", f"{desc} would exceed the {budget['binding']}.")
        elif total > 0.8 * avail:
            say("warn", f"{desc} use {total * 100 // max(avail, 1)}% of the {budget['binding']}.")
    per_mem = profile.get("workers.memory")
    mem_budget = memory_budget(profile, limits, facts)
    if per_mem and mem_budget:
        need = procs * per_mem
        fits = mem_budget // per_mem
        if need > mem_budget:
            say("refuse", f"{procs} processes x {format_size(per_mem)} = {format_size(need)} "
                          f"exceed the {format_size(mem_budget)} memory budget; "
                          f"at most {fits} fit.")
        elif need > 0.9 * mem_budget:
            say("warn", f"{procs} processes x {format_size(per_mem)} = {format_size(need)} use "
                        f"{need * 100 // mem_budget}% of the {format_size(mem_budget)} memory "
                        f"budget; the OOM killer may take workers.")
    if gpu["count"] > gpu["found"]:
        label = get_vendor(gpu["vendor"]).label
        say("warn", f"the profile asks for {gpu['count']} {label} GPU(s) and "
                    f"this host shows {gpu['found']}; use --gpus none to run on the CPU.")
    if fw == "tf" and gpu["count"] > 0 and (facts.max_map_count or 0) <= 65530:
        say("warn", f"vm.max_map_count is {facts.max_map_count} and cannot be raised from a "
                    f"container; TF/CUDA leak ~730 maps per fold, so run one process per fold.")
    address_space = facts.rlimits.get("as")
    if address_space and address_space.soft:
        st = facts.rlimits.get("stack")
        per = st.soft if st and st.soft else 8 * 1024 * 1024
        if total * per > address_space.soft:
            say("warn", f"{total} threads x {format_size(per)} stacks exceed RLIMIT_AS "
                        f"{format_size(address_space.soft)}: thread creation would fail with "
                        f"ENOMEM.")
    for name, value in sorted(inherited.items()):
        if name in DEPRECATED:
            say("warn", f"{name}={value} is deprecated; launcher removes it "
                        f"(use {DEPRECATED[name]}).")
    return v
