"""Pins of the seven core modules (scripts/mutation.py maps this file first to them): their
functions called directly over every fixture host and a matrix of profiles, counters and
sizes, each output compared whole (sentences, keys, numbers, paths) with a golden file under
tests/golden/pins/. The tests beside them check behaviour and read many sentences loosely;
these notice a changed word, key, number or argument order at once (no subprocess, no sleep).
The goldens are what the code does today (`pytest --update-golden` rewrites them; read the
diff before accepting one). Paths are written relative to the tree read (`<root>`), so a copy
of the repository elsewhere compares the same."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from launcher.caps import budget, fit, verdict
from launcher.cgroups import placement
from launcher.errors import LauncherError
from launcher.probe import cgroup, probe_host
from launcher.supervise import diagnose
from launcher.units import format_rlimit, format_size, kib, mib_up, parse_size, term
from tests.conftest import GOLDEN, HOSTS, ROOT, check_golden
from tests.docker_helpers import resolved, start_of, watch_of
from tests.host_trees import V2_MOUNT, host, limited_host

PINS = GOLDEN / "pins"  # not ".../mutants": scripts/mutation.py copies no such folder
PLACEMENT = ROOT / "tests/fixtures/placement"


def _pin(name: str, value: Any, update: bool, *roots: Path) -> None:
    text = json.dumps(value, indent=1, default=_plain) + "\n"
    for root, word in sorted(((r, f"<root{i}>") for i, r in enumerate(roots)),
                             key=lambda rw: -len(str(rw[0]))):
        text = text.replace(str(root), word)
    text = text.replace(str(ROOT), "<repo>")
    check_golden(PINS / f"{name}.json", text, update)


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "_asdict"):
        return value._asdict()
    if hasattr(value, "__dataclass_fields__"):
        return {k: getattr(value, k) for k in value.__dataclass_fields__}
    if isinstance(value, set | frozenset | tuple):
        return sorted(value, key=str)
    if hasattr(value, "value") and hasattr(value, "name"):  # an enum
        return f"{type(value).__name__}.{value.name}"
    if hasattr(value, "__dict__"):
        return vars(value)
    return repr(value)


def _try(fn: Any, *args: Any, **kw: Any) -> Any:
    try:
        return fn(*args, **kw)
    except (LauncherError, ValueError, OSError) as exc:
        return f"{type(exc).__name__}: {exc}"


# -- units.py ------------------------------------------------------------------------------

SIZES = [512, 1, 0, -3, True, 1.5, None, "512k", "8MiB", "7.7GiB", "300m", "1048576", " 2 g ",
         "1t", "3TiB", "4b", "5KiB", "1.5", "0.1", "0k", "2KB", "3mb", "7.7GB", "1Tb", "5x", "abc",
         "", "1e3", "-1k", "2 GiBs"]


def test_sizes_read_and_written_are_pinned(update_golden):
    out = {
        "parse": [[repr(v), _try(parse_size, v)] for v in SIZES],
        "format": [[n, format_size(n)] for n in (0, 1, 1023, 1024, 1536, 1 << 20, 99 * (1 << 20)
                                                 + 1, 100 * (1 << 20) + 5, 314572800,
                                                 8270000000, 1 << 30, (1 << 40) * 3 // 2,
                                                 (1 << 40) * 200 + 1)],
        "mib_up": [mib_up(n) for n in (0, 1, 1 << 20, (1 << 20) + 1, 5 << 20)],
        "term": [term(1346, "bytes"), term(-1346.4, "bytes"), term(0, "threads"),
                 term(-0.4, "x")],
        "kib": [kib(n) for n in (0, 1023, 1024, 524288, 2048 + 1)],
        "rlimit": [format_rlimit(n, v) for n, v in (("stack", 8 << 20), ("memlock", 65536),
                                                    ("nofile", 1024), ("stack", -1),
                                                    ("nproc", 0), ("as", 1 << 30))],
    }
    _pin("units", out, update_golden)


# -- budget.py, verdict.py, fit.py over the fixture hosts -------------------------------------

PROFILES = {
    "torch8": "framework: torch\nthreads: {intra_op: 8}\n",
    "none1": "framework: none\nthreads: {intra_op: 1}\n",
    "pids10": "framework: torch\nthreads: {intra_op: 8}\nlimits: {pids: 10}\n"
              "workers: {processes: 2}\n",
    "pids60": "framework: torch\nthreads: {intra_op: 4}\nlimits: {pids: 60}\n",
    "mem": "framework: none\nthreads: {intra_op: 1}\nlimits: {memory: 2GiB}\n"
           "workers: {processes: 3, memory: 700MiB}\n",
    "mem_warn": "framework: none\nthreads: {intra_op: 1}\nlimits: {memory: 1GiB}\n"
                "workers: {processes: 2, memory: 480MiB}\n",
    "hw": "framework: none\nthreads: {intra_op: 1}\nhardware: {memory: 64MiB}\n"
          "workers: {processes: 2, memory: 40MiB}\n",
    "gpus": "framework: none\nthreads: {intra_op: 1}\ngpu: {vendor: nvidia, count: 2}\n",
    "cpuset": "framework: none\nthreads: {intra_op: 2}\nlimits: {cpuset: '6-9', cpus: 9}\n",
    "cpuset_out": "framework: none\nthreads: {intra_op: 2}\nlimits: {cpuset: '12-13'}\n",
    "turns": "workers: {processes: 2}\nthreads: {intra_op: 4}\n",
    "turns_omp": "framework: torch\nworkers: {processes: 3}\nthreads: {intra_op: 6, omp: 6}\n",
    "jax": "framework: jax\nthreads: {intra_op: 6}\nlimits: {pids: 20}\n",
    "tf_stack": "framework: tf\nthreads: {intra_op: 8, omp_stack: 8MiB}\nlimits: {stack: auto}\n",
    "above": "framework: none\nthreads: {intra_op: 1}\nlimits: {pids: 500, memory: 2GiB, "
             "cpus: 3.5}\n",
    "pids_warn": "framework: none\nthreads: {intra_op: 1}\nlimits: {pids: 2}\n",
    "none_pids": "framework: none\nthreads: {intra_op: 1}\nlimits: {pids: 1}\n",
    "tf_gpu": "framework: tf\nthreads: {intra_op: 2}\ngpu: {vendor: nvidia, count: 1}\n",
}


def _caps(r: Any) -> dict[str, Any]:
    c = r.caps
    out: dict[str, Any] = {"budget": c.budget, "verdict": [c.verdict.level, c.verdict.reasons],
                           "memory_budget": budget.memory_budget(r.profile, c.limits, r.facts),
                           "address": verdict.address_limits(r.facts),
                           "above": verdict.above_outer(c.limits, r.facts)}
    found = fit.fit_to_budget(r)
    out["fit"] = [found.values, found.was, found.now, found.describe(),
                  fit.apply(r, found).caps.estimate.total] if found else None
    refused = found is None and not fit._fits(r, fit.HEADROOM)  # pids or stacks refused
    out["why_nothing"] = _try(fit.why_nothing_fits, r) if refused else None
    out["why_nothing_by"] = _try(fit.why_nothing_fits, r, by="limits.fit") if refused else None
    return out


def _resolved(tmp_path: Path, name: str, text: str, facts: Any, **kw: Any) -> Any:
    return resolved(tmp_path, text, facts, name=name, **kw)


@pytest.mark.parametrize("host", ["v2-limited", "v2-unlimited", "v1-docker", "hybrid-host",
                                  "v2-nested-stricter", "v2-ancestor-only", "docker-5gpu"])
def test_the_caps_of_each_profile_on_a_fixture_host_are_pinned(host, tmp_path, update_golden):
    facts = probe_host(HOSTS / host, environ={})
    out = {name: _caps(_resolved(tmp_path, name, text, facts))
           for name, text in PROFILES.items()}
    # the workload's own threads beside its framework's (a driver)
    for name in ("none1", "pids_warn", "pids10"):
        out[f"{name}+3"] = _caps(_resolved(tmp_path, name, PROFILES[name], facts,
                                           extra_threads=3))
    _pin(f"caps_{host}", out, update_golden, tmp_path, HOSTS / host)


def test_the_caps_under_address_space_limits_are_pinned(tmp_path, update_golden):
    out = {}
    for stack, address, data in ((str(8 << 20), None, str(40 << 20)),
                                 (str(4 << 20), None, str(1 << 20)),
                                 (str(8 << 20), str(64 << 20), "unlimited"),
                                 ("unlimited", None, str(100 << 20)),
                                 (str(4 << 20), str(48 << 20), str(40 << 20))):
        root = limited_host(tmp_path / f"h-{stack}-{address}-{data}", stack=stack,
                            address=address, data=data)
        facts = probe_host(root, environ={})
        for name in ("tf_stack", "torch8", "jax", "pids10"):
            out[f"{name} {stack} {address} {data}"] = _caps(
                _resolved(tmp_path, name, PROFILES[name], facts))
    _pin("caps_address", out, update_golden, tmp_path)


class _Cg:
    def __init__(self, **kw: Any) -> None:
        self.pids_max = self.pids_current = self.memory_limit = self.cpu_quota = None
        self.binding: dict[str, str] = {}
        self.limited: dict[str, str] = {}
        self.__dict__.update(kw)

    def limited_at(self, cap: str) -> str | None:
        return self.limited.get(cap)


class _Rl:
    def __init__(self, soft: int) -> None:
        self.soft = soft


class _Facts:
    """HostFacts as budget.py and verdict.py read them."""

    def __init__(self, **kw: Any) -> None:
        self.cgroup = _Cg()
        self.rlimits: dict[str, _Rl] = {}
        self.nproc_exempt, self.uid_tasks, self.uid, self.tasks = False, 0, 1000, None
        self.threads_max = self.pid_max = None
        self.memory = None
        self.__dict__.update(kw)

    def host_path(self, p: str) -> str:
        return f"/host{p}"

    def host_memory(self) -> int | None:
        return self.memory


class _Limit:
    def __init__(self, value: Any, origin: Any = None) -> None:
        from launcher.caps.model import Origin

        self.value, self.origin = value, origin or Origin.PROFILE


def test_the_pids_budgets_of_each_limit_are_pinned(update_golden):
    from launcher.caps.model import Origin

    none = {"pids": _Limit(None)}
    cases = {
        "nothing": (none, {}, _Facts()),
        "asked": ({"pids": _Limit(40)}, {}, _Facts()),
        "pids_max_bound": (none, {}, _Facts(cgroup=_Cg(pids_max=77, pids_current=3,
                                                          binding={"pids": "/sys/fs/cgroup/a"}))),
        "pids_max_unbound": (none, {}, _Facts(cgroup=_Cg(pids_max=77))),
        "nproc_ulimit": (none, {"nproc": _Rl(50)}, _Facts(uid_tasks=12, uid=7)),
        "nproc_rlimit": (none, {}, _Facts(rlimits={"nproc": _Rl(30)}, uid_tasks=2)),
        "nproc_zero": (none, {}, _Facts(rlimits={"nproc": _Rl(0)})),
        "nproc_unlimited": (none, {}, _Facts(rlimits={"nproc": _Rl(-1)})),
        "nproc_exempt": (none, {"nproc": _Rl(5)}, _Facts(nproc_exempt=True)),
        "kernel": (none, {}, _Facts(threads_max=900, pid_max=4000, tasks=100)),
        "kernel_no_tasks": (none, {}, _Facts(threads_max=900, pid_max=800)),
        "tie": ({"pids": _Limit(70)}, {}, _Facts(cgroup=_Cg(pids_max=70))),
        "all": ({"pids": _Limit(60)}, {"nproc": _Rl(58)},
                _Facts(cgroup=_Cg(pids_max=90, pids_current=35, binding={"pids": "/x"}),
                       threads_max=61, pid_max=62, tasks=1)),
    }
    out: dict[str, Any] = {k: budget.pids_budget(*v) for k, v in cases.items()}
    outer = _Facts(cgroup=_Cg(pids_max=50, memory_limit=300 << 20, cpu_quota=1.5,
                              limited={"pids": "/sys/fs/cgroup/job"}))
    limits = {"pids": _Limit(60), "memory": _Limit(2 << 30), "cpus": _Limit(2.5)}
    out["above"] = verdict.above_outer(limits, outer)
    out["above_whole"] = verdict.above_outer({"cpus": _Limit(4)}, outer)
    out["above_auto"] = verdict.above_outer({"pids": _Limit(60, Origin.AUTO)}, outer)
    out["above_equal"] = verdict.above_outer({"pids": _Limit(50), "memory": _Limit("x")}, outer)
    out["above_none"] = verdict.above_outer(limits, _Facts())
    out["address"] = [verdict.address_limits(_Facts(rlimits={"as": _Rl(5), "data": _Rl(6)})),
                      verdict.address_limits(_Facts(rlimits={"data": _Rl(-1)}))]
    out["oversubscribed"] = [verdict.oversubscribed(2, 4, 2), verdict.oversubscribed(1, 8, 3),
                             verdict.oversubscribed(4, 3, 5), verdict.oversubscribed(8, 2, 3)]
    out["level"] = [verdict._level([]), verdict._level(["ok", "warn"]),
                    verdict._level(["warn", "refuse", "ok"])]
    out["fit"] = [fit.Fit({"limits.cpuset": "0-1", "limits.stack": 2 << 20,
                           "threads.intra_op": 3}, 10, 10, "C").describe(),
                  fit.Fit({}, 5, 4, "D").describe(), fit.HEADROOM,
                  [fit._shown(k, v) for k, v in (("limits.cpuset", "3"),
                                                  ("limits.cpuset", "0,2"),
                                                  ("threads.omp_stack", 3 << 19),
                                                  ("threads.omp", 4))]]
    _pin("caps_units", out, update_golden)


# -- probe/cgroup.py -----------------------------------------------------------------------

def _chains(root: Path) -> dict[str, Any]:
    chains = _try(cgroup.find_chains, root)
    if isinstance(chains, str):
        return {"error": chains}
    out: dict[str, Any] = {}
    for c, chain in chains.items():
        out[c] = {
            "chain": chain, "quota": _try(cgroup.cpu_quota_at, chain),
            "cpuset": _try(cgroup.cpuset_at, chain), "pids": _try(cgroup.pids_binding, chain),
            "read_pids": _try(cgroup.read_pids, chain),
            "memory": _try(cgroup.read_memory, chain),
            "present": {k: cgroup.present_dir(chain, k) for k in cgroup.CONTROLLERS},
            "limit_dirs": {n: cgroup.limit_dir(chain, n) for n in (
                "pids.max", "memory.max", "memory.limit_in_bytes", "memory.high")},
            "nearest": {n: cgroup.nearest(chain, n) for n in (
                "pids.max", "memory.events", "memory.oom_control", "cpu.max")}}
    return out


def test_the_cgroup_readers_on_every_fixture_host_are_pinned(update_golden):
    hosts = sorted(p for p in HOSTS.iterdir() if p.is_dir())
    out = {h.name: _chains(h) for h in hosts}
    _pin("cgroup_hosts", out, update_golden, *hosts)


def _tree(root: Path, version: str, files: dict[str, str]) -> cgroup.Chain:
    dirs = (root / "a/b", root / "a", root)
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text)
    return cgroup.Chain(version, dirs)


CPU_FILES = {
    "v2_max": ("v2", {"a/b/cpu.max": "max 100000", "a/cpu.max": "150000 100000"}),
    "v2_one_field": ("v2", {"a/b/cpu.max": "50000"}),
    "v2_three": ("v2", {"a/b/cpu.max": "1 2 3"}),
    "v2_bare_max": ("v2", {"a/cpu.max": "max"}),
    "v2_zero_period": ("v2", {"a/cpu.max": "100 0"}),
    "v2_zero_quota": ("v2", {"a/cpu.max": "0 100"}),
    "v2_bad": ("v2", {"a/cpu.max": "x 100"}),
    "v2_tighter_above": ("v2", {"a/b/cpu.max": "300000 100000", "cpu.max": "50000 100000"}),
    "v2_equal": ("v2", {"a/b/cpu.max": "100000 100000", "a/cpu.max": "200000 200000"}),
    "v1": ("v1", {"a/b/cpu.cfs_quota_us": "-1", "a/b/cpu.cfs_period_us": "100000",
                  "a/cpu.cfs_quota_us": "250000", "a/cpu.cfs_period_us": "100000"}),
    "v1_no_period": ("v1", {"a/cpu.cfs_quota_us": "250000"}),
    "v1_zero_period": ("v1", {"a/cpu.cfs_quota_us": "5", "a/cpu.cfs_period_us": "0"}),
    "v1_bad": ("v1", {"a/cpu.cfs_quota_us": "5", "a/cpu.cfs_period_us": "ten"}),
    "v2_cpuset": ("v2", {"a/b/cpuset.cpus.effective": "0-3,8", "a/b/cpuset.cpus": "0-1"}),
    "v2_cpuset_plain": ("v2", {"a/b/cpuset.cpus": "2,4"}),
    "v2_cpuset_empty": ("v2", {"a/b/cpuset.cpus.effective": "", "a/b/cpuset.cpus": "5"}),
    "v2_cpuset_bad": ("v2", {"a/b/cpuset.cpus.effective": "3-1"}),
    "v1_cpuset": ("v1", {"a/b/cpuset.effective_cpus": "0-5", "a/b/cpuset.cpus": "0"}),
    "v1_cpuset_plain": ("v1", {"a/b/cpuset.cpus": "0-2"}),
    "v2_pids": ("v2", {"a/b/pids.current": "4", "a/b/pids.max": "max", "a/pids.max": "50",
                       "a/pids.current": "40", "pids.max": "20", "pids.current": "2"}),
    "v2_pids_no_current": ("v2", {"a/pids.max": "30", "a/b/pids.current": "7"}),
    "v2_pids_none": ("v2", {"a/b/pids.current": "9"}),
    "v2_pids_bad": ("v2", {"a/pids.max": "lots"}),
    "v2_pids_bad_current": ("v2", {"a/b/pids.current": "some"}),
    "v2_memory": ("v2", {"a/b/memory.max": "max", "a/memory.max": "1000", "memory.max": "2000",
                         "a/b/memory.current": "500", "a/memory.events":
                         "low 0\nhigh 0\noom 2\noom_kill 3\n"}),
    "v2_memory_zero": ("v2", {"a/memory.max": "0", "a/b/memory.events": "oom 1\n"}),
    "v2_memory_bad": ("v2", {"a/memory.max": "1k"}),
    "v2_memory_bad_events": ("v2", {"a/b/memory.events": "oom_kill x\n"}),
    "v1_memory": ("v1", {"a/b/memory.limit_in_bytes": str(1 << 62), "a/memory.limit_in_bytes":
                         "4096", "a/b/memory.usage_in_bytes": "100",
                         "a/b/memory.oom_control": "oom_kill_disable 0\nunder_oom 0\n"
                                                   "oom_kill 5\n", "memory.limit_in_bytes":
                         "-1"}),
}


@pytest.mark.parametrize("case", list(CPU_FILES))
def test_the_cgroup_readers_of_each_file_are_pinned(case, tmp_path, update_golden):
    version, files = CPU_FILES[case]
    chain = _tree(tmp_path, version, files)
    out = {"quota": _try(cgroup.cpu_quota_at, chain), "read_quota": _try(cgroup.read_cpu_quota,
                                                                         chain),
           "cpuset": _try(cgroup.cpuset_at, chain), "read_cpuset": _try(cgroup.read_cpuset, chain),
           "pids": _try(cgroup.pids_binding, chain), "memory": _try(cgroup.read_memory, chain),
           "limit_dirs": [cgroup.limit_dir(chain, n) for n in ("pids.max", "memory.max",
                                                                "memory.limit_in_bytes")],
           "oom": [_try(cgroup.read_oom_kills, d, version == "v2") for d in chain.dirs],
           "ints": [cgroup.read_int_or_none(tmp_path / n) for n in files]}
    _pin(f"cgroup_{case}", out, update_golden, tmp_path)


def test_quota_rounding_and_effective_cpus_are_pinned(update_golden):
    out = {"round": [[q, r, _try(cgroup.round_quota, q, r)] for q in (0.2, 1.5, 2.49, 2.5, 3.0)
                     for r in ("down", "half-up", "up")],
           "effective": [cgroup.effective_cpus(*a) for a in (
               (8, None, None), (8, 4, None), (8, 0, 1.5), (8, 6, 2.5, "half-up"), (2, 6, 7.0),
               (8, None, 0.3))],
           "list": [_try(cgroup.parse_cpu_list, t) for t in ("0-3,8,10-11", "5", "3-1")],
           "list_path": _try(cgroup.parse_cpu_list, "x", Path("/f")),
           "constants": [cgroup.CONTROLLERS, cgroup.V1_UNLIMITED, cgroup.ROUNDINGS],
           "join": [cgroup._join(Path("/r"), p) for p in ("/Xen/a", "//x", "a/b", "/")]}
    _pin("cgroup_cpus", out, update_golden)


# -- supervise/diagnose.py -----------------------------------------------------------------

def _counters(**kw: Any) -> diagnose.KernelCounters:
    c = diagnose.KernelCounters()
    c.__dict__.update(kw)
    return c


class _Peaks:
    def __init__(self, threads: int) -> None:
        self.threads = threads


def test_each_diagnosis_is_pinned(update_golden):
    zero = _counters()
    cases = {
        "ok": (0, zero, zero), "exit": (3, zero, zero),
        "oom": (137, _counters(oom_kills=1), _counters(oom_kills=3, memory_limit=300 << 20,
                                                       memory_peak=299 << 20)),
        "oom_bare": (1, zero, _counters(oom_kills=1)),
        "oom_threads": (1, zero, _counters(oom_kills=1)),
        "pids": (1, _counters(pids_events={"/a": 1, "/b": 0}),
                 _counters(pids_events={"/a": 4, "/b": 2}, pids_where="/a", pids_peak=77,
                           pids_max=77)),
        "pids_max_only": (1, _counters(pids_events_max=2), _counters(pids_events_max=5,
                                                                     pids_max=50)),
        "exit_pids": (0, zero, _counters(pids_events={"/c": 2}, pids_max=9, pids_peak=9)),
        "exit_pids_status": (-9, zero, _counters(pids_events={"/c": 2})),
        "host_oom": (-signal.SIGKILL, _counters(host_oom_kills=4),
                     _counters(host_oom_kills=6)),
        "sigkill": (-signal.SIGKILL, zero, zero),
        "sigterm": (-signal.SIGTERM, zero, zero), "sigint": (-signal.SIGINT, zero, zero),
        "segv": (-signal.SIGSEGV, zero, zero), "abrt": (-signal.SIGABRT, zero, zero),
        "bus": (-signal.SIGBUS, zero, zero), "fpe": (-signal.SIGFPE, zero, zero),
        "ill": (-signal.SIGILL, zero, zero), "unnamed": (-77, zero, zero),
    }
    out: dict[str, Any] = {}
    for name, (rc, before, after) in cases.items():
        watch = _Peaks(150) if name == "oom_threads" else _Peaks(99) if name == "oom" else None
        out[name] = list(diagnose.diagnose(rc, before, after, None, watch))  # type: ignore[arg-type]
        assert diagnose.explain(rc, before, after, None, watch) == out[name][1]  # type: ignore[arg-type]
    _pin("diagnose", out, update_golden)


def test_a_diagnosis_with_the_evidence_names_the_thread_limit(monkeypatch):
    from launcher.supervise import causes

    monkeypatch.setattr(causes, "clone3_refused", lambda: False)
    zero = _counters()
    assert diagnose.diagnose(1, zero, zero, start_of(nproc=60), watch_of(threads=60)) == (
        "nproc", "the workload exited with its own status 1; RLIMIT_NPROC 60 was reached: UID "
                 "1000 ran ~60 tasks (60 of them the workload's at its peak) and the kernel "
                 "refuses a thread past the soft limit (EAGAIN); raise limits.nproc (ulimit -u) "
                 "or lower the thread caps.")
    assert diagnose.diagnose(1, zero, zero, start_of(nproc=60), watch_of(threads=2)) == (
        "exit", "the workload exited with its own status 1.")


COUNTED = {
    "v2": {"proc/self/mountinfo": V2_MOUNT, "proc/self/cgroup": "0::/job/run\n",
           "proc/vmstat": "pgfault 9\noom_kill 4\n",
           "sys/fs/cgroup/cgroup.controllers": "cpu memory pids\n",
           "sys/fs/cgroup/job/cgroup.controllers": "memory pids\n",
           "sys/fs/cgroup/job/pids.max": "30", "sys/fs/cgroup/job/pids.current": "5",
           "sys/fs/cgroup/job/pids.peak": "29", "sys/fs/cgroup/job/pids.events": "max 6\n",
           "sys/fs/cgroup/job/run/pids.max": "max", "sys/fs/cgroup/job/run/pids.current": "5",
           "sys/fs/cgroup/job/run/pids.events": "max 2\n",
           "sys/fs/cgroup/job/run/pids.peak": "28",
           "sys/fs/cgroup/job/memory.max": "1048576", "sys/fs/cgroup/job/memory.peak": "999",
           "sys/fs/cgroup/job/run/memory.max": "max",
           "sys/fs/cgroup/job/run/memory.events": "oom 1\noom_kill 2\n"},
    "v2_no_peak": {"proc/self/mountinfo": V2_MOUNT, "proc/self/cgroup": "0::/job\n",
                   "sys/fs/cgroup/cgroup.controllers": "memory pids\n",
                   "sys/fs/cgroup/job/pids.max": "max", "sys/fs/cgroup/job/pids.peak": "12",
                   "sys/fs/cgroup/pids.peak": "40",
                   "sys/fs/cgroup/job/memory.max": str(1 << 62)},
    "v1": {"proc/self/mountinfo": "30 23 0:27 / /sys/fs/cgroup/memory rw - cgroup cgroup "
                                  "rw,memory\n31 23 0:28 / /sys/fs/cgroup/pids rw - cgroup "
                                  "cgroup rw,pids\n",
           "proc/self/cgroup": "5:memory:/job\n6:pids:/job\n",
           "sys/fs/cgroup/memory/job/memory.limit_in_bytes": "4096",
           "sys/fs/cgroup/memory/job/memory.max_usage_in_bytes": "4000",
           "sys/fs/cgroup/memory/job/memory.oom_control": "oom_kill_disable 0\noom_kill 1\n",
           "sys/fs/cgroup/pids/job/pids.max": "20", "sys/fs/cgroup/pids/job/pids.current": "3",
           "sys/fs/cgroup/pids/job/pids.events": "max 1\n"},
    "unreadable": {"proc/self/mountinfo": "garbage\n", "proc/self/cgroup": "x\n",
                   "proc/vmstat": "oom_kill x\n"},
}


def test_the_counters_of_each_kind_of_tree_are_pinned(tmp_path, update_golden):
    out = {name: vars(diagnose.read_counters(host(tmp_path / name, files)))
           for name, files in COUNTED.items()}
    _pin("diagnose_counters", out, update_golden, tmp_path)


def test_the_counters_of_every_fixture_host_are_pinned(tmp_path, update_golden):
    hosts = sorted(p for p in HOSTS.iterdir() if p.is_dir())
    out = {h.name: vars(diagnose.read_counters(h)) for h in hosts}
    events = tmp_path / "events"
    events.write_text("low 1\nmax 7\nmax2 x\n")
    bad = tmp_path / "bad"
    bad.write_text("max seven\n")
    out["events"] = [diagnose._events(events, "max"), diagnose._events(events, "low"),
                     diagnose._events(events, "high"), diagnose._events(bad, "max"),
                     diagnose._events(tmp_path / "none", "max")]
    _pin("diagnose_hosts", out, update_golden, tmp_path, *hosts)


# -- cgroups/placement.py ------------------------------------------------------------------

def _granted(root: Path):  # type: ignore[no-untyped-def]
    granted = [root / line for line in (root / "writable").read_text().split()]
    return lambda p: any(p == g or g in p.parents for g in granted)


def _decision(d: placement.Decision) -> dict[str, Any]:
    return {"placements": [[p, p.describe()] for p in d.placements], "advisory": d.advisory}


def test_the_placements_of_every_fixture_tree_are_pinned(update_golden):
    cases = sorted(p for p in PLACEMENT.iterdir() if p.is_dir())
    wanted = ("pids", "memory", "cpu", "cpuset")
    out: dict[str, Any] = {}
    for root in cases:
        out[root.name] = {
            "granted": _decision(placement.place(wanted, root, writable=_granted(root),
                                                 ours={100})),
            "all": _decision(placement.place(wanted, root, writable=lambda p: True, ours={100})),
            "none": _decision(placement.place(wanted, root, writable=lambda p: False,
                                              ours=set())),
            "others": _decision(placement.place(("pids", "memory"), root,
                                                writable=lambda p: True, ours=set())),
            "search": placement.search_dirs(root)}
    for root in sorted(p for p in HOSTS.iterdir() if p.is_dir()):
        out[f"host {root.name}"] = _try(lambda r: _decision(placement.place(
            ("pids", "memory", "cpu"), r, writable=lambda p: True, ours=set())), root)
    _pin("placement", out, update_golden, *cases, *sorted(HOSTS.iterdir()))


def test_carried_and_uncarried_limits_are_pinned(tmp_path, update_golden):
    files = {
        "a/pids.max": "60", "b/pids.max": "40", "c/pids.max": "max",
        "a/memory.max": "max", "b/memory.max": "1000", "c/memory.max": "999",
        "a/memory.high": "junk", "b/memory.high": "", "c/memory.high": "5000",
        "a/memory.swap.max": "0", "a/cpu.max": "50000 100000", "b/cpu.max": "30000 50000",
        "c/cpu.max": "100000 0", "b/cpuset.cpus": "0-3", "a/cpuset.cpus.effective": "1-2",
        "c/cpuset.mems": "0", "a/cpuset.cpus": "1-3", "d/cpuset.cpus": "max",
        "d/cpuset.cpus.effective": "0-7", "a/io.max": "8:0 rbps=max wbps=max", "b/io.max":
        "8:0 rbps=100 wbps=max\n8:16 rbps=max", "b/hugetlb.2MB.max": str(1 << 62),
        "c/hugetlb.1GB.max": "1073741824", "c/rdma.max": "mlx4_0 hca_handle=max",
        "a/misc.max": "res_a 4", "c/memory.zswap.max": "max",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    a, b, c, d = tmp_path / "a", tmp_path / "b", tmp_path / "c", tmp_path / "d"
    out = {"abc": placement.carried_limits([a, b, c]), "c": placement.carried_limits([c]),
           "d": placement.carried_limits([d]), "ab": placement.carried_limits([a, b]),
           "ba": placement.carried_limits([b, a]),
           "uncarried": [placement.uncarried_limits(x) for x in ([a], [b], [c], [a, b, c])],
           "unlimited": [placement._unlimited(v) for v in ("max", str(1 << 62),
                                                           str((1 << 62) - 1), "1", "x")],
           "controller": [k.controller for k in placement.carried_limits([a, b, c])],
           "constants": [placement.FIX, placement.NO_CONTROLLER, placement.LIMIT_FILES,
                         placement.UNCARRIED]}
    _pin("placement_carried", out, update_golden, tmp_path)


def test_each_placement_is_described_in_words():
    p = Path("/sys/fs/cgroup")
    words = [placement.Placement("v2", p / "a", ("pids",), mode=m, caller=p / "a/b",
                                 leaf=p / "a/b/launcher-leaf").describe()
             for m in ("root", "own", "leaf", "beside")]
    assert words == [
        "cgroup v2: a child of the root cgroup",
        "cgroup v2: a child of the caller's cgroup /sys/fs/cgroup/a/b",
        "cgroup v2: a child of the caller's cgroup /sys/fs/cgroup/a/b, launcher's own "
        "processes moved into /sys/fs/cgroup/a/b/launcher-leaf",
        "cgroup v2: a child of /sys/fs/cgroup/a, beside the caller's cgroup /sys/fs/cgroup/a/b"]
    assert placement.Carried("memory.swap.max", "0", p).controller == "memory"
