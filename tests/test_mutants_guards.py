"""Guards that scripts/mutation.py's statement, return, string, float, swap and loop operators
showed missing: the never-crash fallbacks (a chain, a file or /proc/loadavg that cannot be
read), the strictest ancestor's CPU quota under a leaf's `max`, the source named for a cpuset
carried over several levels, the order of `--fit`'s two figures, and sizes shown as sizes.
Host trees are written under tmp_path; nothing here reads the real host's cgroups."""

from __future__ import annotations

import io

import pytest

from launcher.caps.fit import Fit, _shown, fit_to_budget, why_nothing_fits
from launcher.caps.resolve import resolve
from launcher.cgroups.placement import Carried, _enable_path, _read_set, carried_limits
from launcher.errors import HostError
from launcher.probe import probe_host
from launcher.probe.cgroup import Chain, cpu_quota_at, read_cpu_quota
from launcher.probe.limits import read_tasks
from launcher.profiles import load_profile
from launcher.supervise import diagnose, evidence
from launcher.supervise.diagnose import KernelCounters, read_counters
from tests.docker_helpers import limited_host_of, resolved, verdict_of
from tests.host_trees import LIMITED, host

# The never-crash fallbacks


def test_counters_of_a_chain_that_cannot_be_read_are_the_hosts_alone(tmp_path, monkeypatch):
    """find_chains raising (a malformed mountinfo, a cgroup gone): the supervisor still gets
    its counters, the kernel's OOM kills among them, and no cgroup's."""
    root = host(tmp_path, {"proc/vmstat": "nr_free_pages 10\noom_kill 3\n"})

    def broken(_root):  # type: ignore[no-untyped-def]
        raise HostError("proc/self/mountinfo: malformed line")

    monkeypatch.setattr(diagnose, "find_chains", broken)
    c = read_counters(root)
    assert isinstance(c, KernelCounters)
    assert c.host_oom_kills == 3
    assert (c.pids_max, c.pids_events, c.oom_kills, c.memory_limit) == (None, {}, None, None)


def test_a_set_file_that_cannot_be_read_is_an_empty_set(tmp_path):
    assert _read_set(tmp_path / "missing") == set()
    assert _read_set(tmp_path) == set()  # a directory: IsADirectoryError
    (tmp_path / "cgroup.controllers").write_text("cpu  pids\nmemory\n")
    assert _read_set(tmp_path / "cgroup.controllers") == {"cpu", "pids", "memory"}


def test_the_path_to_enable_a_controller_through_unreadable_control_files(tmp_path):
    """A level whose cgroup.subtree_control cannot be read has enabled nothing: it is
    written; the level that offers the controller ends the path."""
    cg = host(tmp_path, {"top/cgroup.type": "domain\n", "top/cgroup.controllers": "pids\n",
                         "top/mid/cgroup.type": "domain\n",
                         "top/mid/leaf/cgroup.type": "domain\n"})
    dirs = (cg / "top/mid/leaf", cg / "top/mid", cg / "top")
    assert _enable_path("pids", dirs, 1, lambda _p: True, emptied=False) == [2, 1]


def test_an_unreadable_proc_loadavg_is_zeros_and_a_readable_one_its_fields(monkeypatch):
    def unreadable(*_a, **_k):  # type: ignore[no-untyped-def]
        raise PermissionError("/proc/loadavg")

    monkeypatch.setattr(evidence, "open", unreadable, raising=False)
    assert evidence.loadavg() == (0, 0)
    monkeypatch.setattr(evidence, "open", lambda *_a, **_k: io.StringIO("0.1 0.2\n"),
                        raising=False)
    assert evidence.loadavg() == (0, 0)  # too few fields
    monkeypatch.setattr(evidence, "open",
                        lambda *_a, **_k: io.StringIO("0.50 0.40 0.30 2/345 6789\n"),
                        raising=False)
    assert evidence.loadavg() == (345, 6789)


def test_a_tree_without_proc_loadavg_has_no_task_count(tmp_path):
    assert read_tasks(host(tmp_path, {"proc/": ""})) is None
    assert read_tasks(host(tmp_path, {"proc/loadavg": "0.5 0.4 0.3 2/345 6789\n"})) == 345


# The strictest ancestor's CPU quota


def _cpu_chain(tmp_path, levels: dict[str, str | None]) -> Chain:  # type: ignore[no-untyped-def]
    """A v2 chain, leaf first: each level's cpu.max (None: no such file)."""
    dirs = []
    for name, text in levels.items():
        d = tmp_path / name
        d.mkdir(parents=True, exist_ok=True)
        if text is not None:
            (d / "cpu.max").write_text(text)
        dirs.append(d)
    return Chain("v2", tuple(dirs))


def test_a_v2_leaf_at_max_under_an_ancestors_quota_gets_the_ancestors(tmp_path):
    chain = _cpu_chain(tmp_path, {"a/b/leaf": "max 100000\n", "a/b": "max 100000\n",
                                  "a": "150000 100000\n", ".": None})
    assert read_cpu_quota(chain) == 1.5
    assert cpu_quota_at(chain) == (1.5, tmp_path / "a")


def test_a_v2_leaf_without_cpu_max_under_an_ancestors_quota_gets_the_ancestors(tmp_path):
    chain = _cpu_chain(tmp_path, {"a/leaf": None, "a": "50000 100000\n"})
    assert cpu_quota_at(chain) == (0.5, tmp_path / "a")


def test_the_strictest_of_several_quotas_is_kept_wherever_it_is(tmp_path):
    chain = _cpu_chain(tmp_path, {"a/b/leaf": "300000 100000\n", "a/b": "max\n",
                                  "a": "100000 100000\n", ".": "200000 100000\n"})
    assert cpu_quota_at(chain) == (1.0, tmp_path / "a")


def test_v1_quotas_of_minus_one_are_skipped_for_an_ancestors(tmp_path):
    for name, quota in (("a/leaf", "-1"), ("a", "25000")):
        host(tmp_path, {f"{name}/cpu.cfs_quota_us": f"{quota}\n",
                        f"{name}/cpu.cfs_period_us": "100000\n"})
    chain = Chain("v1", (tmp_path / "a/leaf", tmp_path / "a"))
    assert cpu_quota_at(chain) == (0.25, tmp_path / "a")


# The cpuset carried over several levels


def test_a_cpuset_carried_over_several_levels_names_the_nearest_that_sets_it(tmp_path):
    """The value is the caller's effective cpuset (what the kernel made of every level's);
    its source is the nearest level that sets one, not a farther one."""
    host(tmp_path, {"leaf/cpuset.cpus": "", "leaf/cpuset.cpus.effective": "2-3\n",
                    "mid/cpuset.cpus": "0-3\n", "top/cpuset.cpus": "0-7\n",
                    "top/pids.max": "90\n", "mid/pids.max": "max\n"})
    left = [tmp_path / "leaf", tmp_path / "mid", tmp_path / "top"]
    carried = {c.file: c for c in carried_limits(left)}
    assert carried["cpuset.cpus"] == Carried("cpuset.cpus", "2-3", tmp_path / "mid")
    assert carried["pids.max"] == Carried("pids.max", "90", tmp_path / "top")
    assert "cpuset.mems" not in carried


# --fit's line


def test_fits_line_shows_the_peak_before_then_after_and_sizes_as_sizes():
    fit = Fit({"limits.stack": 2 << 20, "threads.omp_stack": 1 << 20, "threads.intra_op": 3},
              was=40, now=12, cost="thread stacks shrink")
    assert fit.describe() == ("limits.stack 2MiB, threads.omp_stack 1MiB, threads.intra_op 3 "
                              "(threads at the peak ~40 -> ~12): thread stacks shrink")
    assert _shown("threads.omp_stack", 512 << 10) == "512KiB"
    assert _shown("limits.stack", 8 << 20) == "8MiB"
    assert _shown("limits.cpuset", "0-1") == "0-1 (CPUs 0-1)"
    assert _shown("limits.cpuset", "0") == "0 (CPU 0)"


def test_a_fit_records_the_estimate_before_as_was_and_the_fitted_as_now(tmp_path):
    facts = probe_host(LIMITED, environ={})
    prof = tmp_path / "t.yaml"
    prof.write_text("extends: base\nframework: torch\nthreads: {intra_op: 8}\n"
                    "limits: {pids: 10}\nworkers: {processes: 2}\n")
    r = resolve(load_profile(prof), facts)
    fit = fit_to_budget(r)
    assert fit is not None
    now = r.with_values(fit.values, "--fit").caps.estimate.total
    assert (fit.was, fit.now) == (r.caps.estimate.total, now)
    assert fit.was > fit.now
    assert f"(threads at the peak ~{fit.was} -> ~{fit.now}): " in fit.describe()


@pytest.mark.parametrize("value", [0, 1])
def test_fit_values_that_are_not_sizes_are_shown_as_written(value):
    assert _shown("threads.intra_op", value) == str(value)


# The growth watch: a census read from a /proc tree that changes under it, the likeliest limit


def test_a_census_skips_processes_and_threads_gone_while_it_reads(tmp_path):
    from launcher.telemetry.census import names_of

    host(tmp_path, {"10/task/10/comm": "python\n", "10/task/11/comm": "pt_main_thread\n",
                    "10/task/12/": "",  # ended while we looked: no comm
                    "10/task/13/comm": "pt_main_thread\n", "12/task/12/comm": "worker\n"})
    names, mains = names_of([10, 11, 12], proc=str(tmp_path))  # 11 is gone
    assert names == {"python": 1, "pt_main_thread": 2, "worker": 1}
    assert mains == {"python", "worker"}


def test_the_frameworks_loaded_are_read_from_maps_and_an_unreadable_one_is_none(tmp_path):
    from launcher.telemetry.census import _libraries, loaded

    libs = _libraries()
    assert len(libs) >= 2
    (a, a_lib, a_unnamed, a_fix, a_files), (b, b_lib, *_) = libs[0], libs[1]
    host(tmp_path, {"5/maps": f"7f00 r-xp /x/{b_lib.decode()}\n7f01 r-xp /y/{a_lib.decode()}\n"})
    found = loaded(5, proc=str(tmp_path))
    assert found[a] == {"unnamed": a_unnamed, "fix": a_fix,
                        **({"files_fix": a_files} if a_files else {})}
    assert list(loaded(5, proc=str(tmp_path), first=b)) == [b, a]
    assert list(loaded(5, proc=str(tmp_path), first=a)) == [a, b]
    assert loaded(6, proc=str(tmp_path)) == {}


def test_each_limit_the_likeliest_names_in_full():
    from launcher.telemetry.failures import likeliest

    at = {"nproc": 60, "uid": 1234, "uid_tasks_outside": 10, "pids_max": 40, "threads_max": 30,
          "data": 100 << 20, "stack": 1 << 20, "threads_seen": 3, "vm_data_seen": 20 << 20}
    head = "likeliest (not counted: the peak was shorter than a sample), "
    assert likeliest({"thread": "x"}, at) == (
        f"{head}kernel.threads-max 30 (raise it with sysctl, or lower the thread caps): the "
        f"workload printed 'x'")
    assert likeliest({"thread": "x"}, {**at, "threads_max": None}) == (
        f"{head}pids.max 40 (raise limits.pids or lower the thread caps): the workload "
        f"printed 'x'")
    assert likeliest({"thread": "x"}, {**at, "threads_max": None, "pids_max": None}) == (
        f"{head}RLIMIT_NPROC 60 for UID 1234 (about 50 threads for the workload; raise "
        f"limits.nproc or lower the thread caps): the workload printed 'x'")
    assert likeliest({"memory": "MemoryError", "files": "f"}, at) == (
        f"{head}RLIMIT_DATA 100MiB, with each thread reserving a 1MiB stack (set limits.stack "
        f"and threads.omp_stack smaller, or raise ulimit -d): the workload printed "
        f"'MemoryError'")
    assert likeliest({"thread": "x"}, {"address_space": 64 << 20, "stack": 2 << 20}) == (
        f"{head}RLIMIT_AS 64MiB, with each thread reserving a 2MiB stack (set limits.stack and "
        f"threads.omp_stack smaller, or raise ulimit -v): the workload printed 'x'")
    assert likeliest({"files": "Too many open files"}, at) is None
    assert likeliest({"thread": "x"}, {"nproc": 9, "nproc_exempt": True}) is None



def _fit_of(tmp_path, text: str):  # type: ignore[no-untyped-def]
    r = resolved(tmp_path, "framework: torch\n" + text, name="t")  # 2 CPUs (quota 1.5)
    return r, fit_to_budget(r)


def test_processes_taking_turns_on_the_cpus_are_fitted_with_pools_of_their_share(tmp_path):
    """The CPUs' fit: intra_op to each process's share, OpenMP's too where the profile sets
    it (else it follows intra_op)."""
    r, fit = _fit_of(tmp_path, "workers: {processes: 2}\nthreads: {intra_op: 4}\n")
    assert fit is not None and fit.values == {"threads.intra_op": 1}
    assert (fit.was, fit.now) == (r.caps.estimate.total, 5) and fit.was > 5
    assert fit.cost == "its CPU pools shrink from 4 to 1 threads, so 2 processes x 1 fit the 2 CPUs"
    r, fit = _fit_of(tmp_path, "workers: {processes: 4}\nthreads: {intra_op: 3, omp: 2}\n")
    assert fit is not None and fit.values == {"threads.intra_op": 1, "threads.omp": 1}
    assert fit.cost == ("its CPU pools shrink from 3 to 1 threads, the least a pool can be; 4 "
                        "processes still take turns on 2 CPUs (--processes 2 would not)")
    r, fit = _fit_of(tmp_path, "workers: {processes: 2}\nthreads: {intra_op: 2, omp: 3}\n")
    assert fit is not None and fit.cost.startswith("its CPU pools shrink from 3 to 1 threads")
    assert _fit_of(tmp_path, "workers: {processes: 2}\n")[1] is None  # pools of 1 already


def test_a_census_of_this_process_counts_its_own_threads():
    import os
    import threading

    from launcher.telemetry.census import census

    counted = census([os.getpid()])
    assert sum(n for names in counted.values() for n in names.values()) == len(
        os.listdir(f"/proc/{os.getpid()}/task")) >= threading.active_count()


def test_growth_options_built_without_a_profile_name_the_flag_that_stops():
    from launcher.telemetry.growth_watch import GrowthOptions

    options = GrowthOptions(stop=True)
    assert (options.stop_by, options.window, options.pattern) == ("--stop-before-limit", None,
                                                                  None)


class _Rows:
    """A sampler's rows, one a sample (growth_watch.Sampling: the watch's view of launcher's
    Sampler)."""

    interval = 1.0

    def __init__(self) -> None:
        self.rows: list[dict[str, object]] = []
        self.log: list[dict[str, object]] = []  # every row: the watch trims `rows`
        self.paced: list[float] = []

    def sample(self, extra: dict[str, object] | None = None) -> None:
        self.log.append({"t": float(len(self.log)), "threads": 3, **(extra or {})})
        self.rows.append(self.log[-1])

    def pace(self, cycle_s: float) -> None:
        self.paced.append(cycle_s)


def test_a_units_boundaries_closer_than_the_debounce_are_one(monkeypatch):
    """A step counter printing many lines at once marks one cycle, not one per line; a
    boundary later than MIN_BOUNDARY_S is another."""
    from launcher.telemetry import growth_watch
    from launcher.telemetry.growth_watch import MIN_BOUNDARY_S, GrowthOptions, GrowthWatch

    clock = [1000.0]
    monkeypatch.setattr(growth_watch.time, "monotonic", lambda: clock[0])
    said: list[str] = []
    watch = GrowthWatch(GrowthOptions(), said.append)
    rows = _Rows()
    watch.attach(rows, None)
    watch.output("stdout", b"step 1\nstep 2\nstep 3\n")
    assert [r["cycle"]["n"] for r in rows.log] == [1]  # type: ignore[index]
    clock[0] += MIN_BOUNDARY_S * 2
    watch.output("stdout", b"step 4\n")
    assert [r["cycle"]["n"] for r in rows.log] == [1, 4]  # type: ignore[index]
    assert not watch.broken and said == []


def test_the_declared_pools_are_every_frameworks_and_every_gpu_vendors():
    from launcher.frameworks import get, names
    from launcher.telemetry.census import declared
    from launcher.vendors import all_vendors

    pools = declared()
    expected = [p for n in names() for p in get(n).thread_pools]
    expected += [p for v in all_vendors() for p in v.thread_pools]
    assert any(v.thread_pools for v in all_vendors())
    assert list(pools) == expected


@pytest.mark.parametrize(("reason", "key", "said"), [
    ("threads-max", "threads", "threads grew +7 per fold; kernel.threads-max was reached in "
                               "fold 5; a higher limit only delays it: join or close"),
    ("nproc", "threads", "threads grew +7 per fold; RLIMIT_NPROC was reached in fold 5; a "
                         "higher limit only delays it: join or close"),
    ("as", "vm_size_bytes", "VmSize grew +64MiB per fold; RLIMIT_AS 520MiB was reached in "
                            "fold 8; a higher limit only delays it: free what each cycle keeps"),
    ("data", "vm_data_bytes", "VmData grew +64MiB per fold; RLIMIT_DATA 520MiB was reached in "
                              "fold 8; a higher limit only delays it: free what each cycle "
                              "keeps")])
def test_each_limit_a_growth_died_of_is_named_with_its_series(reason, key, said):
    from launcher.telemetry.growth_verdict import growth_record
    from tests.growth_runs import rows_of

    if key == "threads":
        rows = rows_of([3, 16, 23, 30, 37], excess=8)
    else:
        rows = rows_of([(100 + 64 * i) << 20 for i in range(8)], key=key, limit=520 << 20,
                       excess=1 << 20)
    record = growth_record(rows, {"failure_text": {}}, {"reason": reason, "diagnosis": "d."},
                           status=134)
    assert record["diagnosis"].startswith(said), record["diagnosis"]


def test_processes_taking_turns_on_the_cpus_warn_in_the_verdict(tmp_path):
    from launcher.caps.verdict import oversubscribed

    r, _ = _fit_of(tmp_path, "workers: {processes: 2}\nthreads: {intra_op: 4}\n")
    assert r.caps.verdict.level == "warn"
    assert r.caps.verdict.reasons == [oversubscribed(2, 4, 2)]
    assert oversubscribed(2, 4, 2).startswith("2 processes x 4 compute threads = 8 on 2 CPU(s): "
                                              "oversubscribed 4x, so they take turns")


# The sample of 2026-11-26 (seed 1): the level and words of single reasons, --fit's keys


def test_missing_gpus_alone_make_the_verdict_a_warning(tmp_path):
    """No other reason: the GPUs' own warning is what turns the verdict from ok to warn."""
    one = "framework: none\nthreads: {intra_op: 1}\n"
    assert verdict_of(tmp_path, one) == ("ok", [])
    assert verdict_of(tmp_path, one + "gpu: {vendor: nvidia, count: 2}\n") == (
        "warn", ["the profile asks for 2 NVIDIA GPU(s) and this host shows 0; use --gpus none "
                 "to run on the CPU."])


def test_a_memory_limit_above_the_cgroups_names_the_memory_limit(tmp_path):
    assert verdict_of(tmp_path, "framework: none\nthreads: {intra_op: 1}\n"
                              "limits: {memory: 2GiB}\n") == (
        "warn", ["limits.memory 2GiB is above the memory limit 300MiB of /sys/fs/cgroup/job, "
                 "which binds: the run gets at most 300MiB."])


def test_nothing_fits_lists_every_key_of_the_smallest_tried(tmp_path):
    """Stacks that never fit and a pool to shrink: the smallest tried sets both."""
    facts = probe_host(limited_host_of(tmp_path, str(8 << 20), str(1 << 20)), environ={})
    r = resolved(tmp_path, "framework: tf\nthreads: {intra_op: 4}\nlimits: {stack: auto}\n", facts)
    assert fit_to_budget(r) is None
    assert why_nothing_fits(r) == (
        "--fit: nothing fits: even limits.stack 1MiB, threads.intra_op 1 reserves 11.0MiB of "
        "thread stacks, above half of DATA 1MiB.")


def test_the_pools_of_a_framework_not_bound_to_the_affinity_are_named_plainly(tmp_path):
    """torch's pools follow threads.intra_op alone: no variable in brackets; JAX's name the one
    that sizes them."""
    fit = fit_to_budget(resolved(tmp_path, "framework: torch\nthreads: {intra_op: 4}\n"
                                     "limits: {pids: 10}\n"))
    assert fit is not None and fit.values == {"threads.intra_op": 3}
    assert fit.cost == "its CPU pools shrink from 4 to 3 threads (CPU-bound work scales with them)"


def test_the_kernels_peak_at_a_boundary_is_the_cycle_befores_in_the_report():
    """The sampler writes the run cgroup's peak charge since the last boundary as
    `memory_peak_bytes` on a boundary row (docs/telemetry.md): it is the closing cycle's, and
    the report's cycle table shows it in a column of its own."""
    from launcher.telemetry import growth
    from launcher.usecases.growth_report import cycle_rows
    from tests.growth_runs import rows_of

    rows = rows_of([3, 16, 23], excess=8)
    rows[2]["memory_peak_bytes"] = 300 << 20  # fold 2's boundary: fold 1's peak
    rows[4]["memory_peak_bytes"] = 310 << 20
    unit, cycles = growth.cycles_of(rows)
    assert (unit, [c.kernel_peak for c in cycles]) == ("fold", [300 << 20, 310 << 20, None])
    assert cycle_rows(growth.to_json(unit, cycles, [])) == [
        ("fold", "seconds", "threads (floor-peak)", "memory peak (kernel)"),
        ("1", "1.0", "3-11", "300MiB"), ("2", "1.0", "16-24", "310MiB"),
        ("3", "(last)", "23-31", "-")]


def test_a_trend_line_after_the_run_has_no_time_from_now():
    """The report's trend line (ended): where the limit is reached, without `in ~N s`; live,
    the time to it, or `in the one now running`, or nothing where it is not known; a limit not
    known is `?`."""
    import dataclasses

    from launcher.telemetry.growth_words import live_line
    from tests.growth_runs import rows_of, threads_trend

    t = threads_trend(rows_of([3, 16, 23, 30], excess=8), now=3.0)
    assert t is not None and t.in_s == 2.0
    said = "threads +7 per fold (folds 2-4): pids.max 50 reached in fold ~6"
    assert live_line(t, ended=True) == said
    assert live_line(t) == f"{said}, in ~2 s"
    assert live_line(dataclasses.replace(t, in_s=0)) == f"{said}, in the one now running"
    assert live_line(dataclasses.replace(t, in_s=None)) == said
    assert live_line(dataclasses.replace(t, limit=None)) == (
        "threads +7 per fold (folds 2-4): pids.max ? reached in fold ~6, in ~2 s")


def test_a_census_closes_each_comm_file_it_reads(tmp_path):
    """Read at every boundary of a long run: a descriptor kept per thread would run the
    supervisor out of RLIMIT_NOFILE."""
    import os

    from launcher.telemetry.census import names_of

    host(tmp_path, {f"10/task/{t}/comm": "worker\n" for t in range(10, 30)})
    before = len(os.listdir("/proc/self/fd"))
    names, _ = names_of([10], proc=str(tmp_path))
    assert names == {"worker": 20}
    assert len(os.listdir("/proc/self/fd")) == before


# The supervisor's reason codes (the exit record's `reason`, summary.json's ended.reason)


def test_each_end_of_a_run_has_its_reason_code():
    from launcher.supervise.diagnose import diagnose

    before, after = KernelCounters(), KernelCounters()
    assert diagnose(0, before, after)[0] == "ok"
    assert diagnose(3, before, after)[0] == "exit"
    assert diagnose(-15, before, after) == ("signal", "the workload was killed by SIGTERM.")
    code, said = diagnose(-9, before, after)
    assert code == "sigkill" and said.startswith("the workload was killed by SIGKILL, and no "
                                                 "OOM kill was counted")
    after.host_oom_kills = 1
    assert diagnose(-9, before, after)[0] == "host-oom"
    before.pids_events, after.pids_events, after.pids_max = {"/a": 0}, {"/a": 2}, 40
    assert diagnose(1, before, after)[0] == "pids"
    assert diagnose(0, before, after)[0] == "exit-pids"
    before.oom_kills, after.oom_kills = 0, 1
    assert diagnose(-9, before, after)[0] == "oom"


def test_a_signal_without_a_name_is_said_by_its_number():
    """A real-time signal (SIGRTMIN+6 is 40 on Linux) has no name of its own in Python's
    signal.Signals: the workload was killed by `signal 40`."""
    import signal

    from launcher.supervise.diagnose import diagnose

    with pytest.raises(ValueError):
        signal.Signals(40)
    assert diagnose(-40, KernelCounters(), KernelCounters()) == ("signal",
                                                     "the workload was killed by signal 40.")


def test_a_units_boundaries_are_one_within_the_documented_debounce_of_0_05_s(monkeypatch):
    """docs/growth.md: boundaries of one unit closer than 0.05 s are one; 0.06 s apart, two."""
    from launcher.telemetry import growth_watch
    from launcher.telemetry.growth_watch import GrowthOptions, GrowthWatch

    clock = [1000.0]
    monkeypatch.setattr(growth_watch.time, "monotonic", lambda: clock[0])
    watch = GrowthWatch(GrowthOptions(), [].append)
    rows = _Rows()
    watch.attach(rows, None)
    for step, after in ((1, 0.0), (2, 0.04), (3, 0.06), (4, 0.06)):
        clock[0] += after
        watch.output("stdout", f"step {step}\n".encode())
    assert [r["cycle"]["n"] for r in rows.log] == [1, 3, 4]  # type: ignore[index]


# The sample of seed 2: v1's controllers, a mount holding nothing, a cycle named after a
# repeated outer one, a pattern's group `n`, the memory words, the stacks already mapped, the
# RSS for the memory limit, the peaks' fix


def test_a_v1_controller_is_present_in_the_leaf_itself(tmp_path):
    """v1: each controller is a hierarchy of its own, with no cgroup.controllers to read: the
    leaf has its interface files."""
    from launcher.probe.cgroup import present_dir

    host(tmp_path, {"pids/a/leaf/pids.max": "9\n", "pids/a/pids.max": "max\n"})
    chain = Chain("v1", (tmp_path / "pids/a/leaf", tmp_path / "pids/a"))
    assert present_dir(chain, "pids") == tmp_path / "pids/a/leaf"


def test_where_no_mount_holds_the_cgroup_one_that_exists_is_preferred(tmp_path):
    """Neither mount's root holds the cgroup's path: a mount point that is there wins over a
    longer root whose mount point is not."""
    from launcher.probe.cgroup import holding_mount
    from launcher.probe.mountinfo import Membership, Mount

    host(tmp_path, {"sys/fs/cgroup/pids/tasks": ""})
    there = Mount("/sys/fs/cgroup/pids", "/other", "cgroup", frozenset({"pids"}))
    gone = Mount("/sys/fs/cgroup/gone", "/other/deeper", "cgroup", frozenset({"pids"}))
    member = Membership("3", frozenset({"pids"}), "/jobs/a")
    assert holding_mount(tmp_path, [gone, there], member) == there
    assert holding_mount(tmp_path, [there, gone], member) == there


def test_a_line_repeating_the_outer_cycle_marks_the_inner_one():
    """Keras in a k-fold prints the fold on each epoch's line: `Fold 1/5 - Epoch 2/10` is
    epoch 2, though fold 1 marks nothing again."""
    from launcher.telemetry.cycles import Boundary, CycleMarks

    marks = CycleMarks()
    assert marks.feed("stdout", b"Fold 1/5\nFold 1/5 - Epoch 2/10\n") == [
        Boundary("fold", 1, 5, "Fold 1/5"), Boundary("epoch", 2, 10, "Fold 1/5 - Epoch 2/10")]


def test_a_patterns_group_n_is_the_number_wherever_it_is():
    """docs: the first group, or the group named `n`: here the second."""
    from launcher.telemetry.cycles import Boundary, CycleMarks, compile_pattern

    marks = CycleMarks(compile_pattern(r"(train|eval) round (?P<n>\d+)"))
    assert marks.feed("stdout", b"train round 3\neval round 4\n") == [
        Boundary("cycle", 3, None, "train round 3"), Boundary("cycle", 4, None, "eval round 4")]


@pytest.mark.parametrize("line", ["cannot allocate memory for thread-local data",
                                  "OSError: [Errno 12] Cannot allocate memory",
                                  "terminate called after throwing 'std::bad_alloc'",
                                  "MemoryError", "RuntimeError: memory allocation failed"])
def test_each_of_the_memory_words_is_kept(line):
    from launcher.telemetry.failures import FailureText

    text = FailureText()
    text.feed(f"{line}\n".encode())
    assert text.found == {"memory": line}


@pytest.mark.parametrize(("key", "seen", "word", "fix"), [
    ("data", "vm_data_seen", "RLIMIT_DATA", "ulimit -d"),
    ("address_space", "vm_size_seen", "RLIMIT_AS", "ulimit -v")])
def test_the_address_space_already_mapped_leaves_room_for_fewer_stacks(key, seen, word, fix):
    """100MiB, 95MiB of it mapped when last seen: room for ~5 more 1MiB stacks, fewer than
    pids.max 40 allows; with nothing seen mapped, pids.max would bind first."""
    from launcher.telemetry.failures import likeliest

    at = {key: 100 << 20, "stack": 1 << 20, "threads_seen": 3, "pids_max": 40}
    assert likeliest({"thread": "x"}, {**at, seen: 95 << 20}) == (
        f"likeliest (not counted: the peak was shorter than a sample), {word} 100MiB, with each "
        f"thread reserving a 1MiB stack (set limits.stack and threads.omp_stack smaller, or "
        f"raise {fix}): the workload printed 'x'")
    assert "pids.max 40" in str(likeliest({"thread": "x"}, at))


def test_an_oom_without_a_memory_cgroup_is_said_of_the_rss():
    from launcher.telemetry.growth_verdict import growth_record
    from tests.growth_runs import rows_of

    rows = rows_of([(100 + 64 * i) << 20 for i in range(8)], key="rss_bytes", limit=520 << 20,
                   excess=1 << 20)
    record = growth_record(rows, {"failure_text": {}}, {"reason": "oom", "diagnosis": "d."},
                           status=137)
    assert record["diagnosis"].startswith(
        "RSS grew +64MiB per fold; the memory limit 520MiB was reached in fold 8; a higher "
        "limit only delays it: free what each cycle keeps"), record["diagnosis"]


def test_a_death_of_growing_peaks_gets_the_peaks_fix():
    """Floors flat, peaks +10MiB a fold: what each cycle needs grows, not what it keeps."""
    from launcher.telemetry.growth_verdict import growth_record
    from tests.growth_runs import rows_of

    rows = rows_of([100 << 20] * 8, key="memory_bytes", limit=400 << 20)
    for i, r in enumerate(r for r in rows if not r.get("cycle")):
        r["memory_bytes"] = (100 << 20) + (10 << 20) * (i + 1)
    record = growth_record(rows, {"failure_text": {}}, {"reason": "oom", "diagnosis": "d."},
                           status=137)
    assert record["diagnosis"] == (
        "memory grew +10MiB per fold at each fold's peak; the memory limit 400MiB was reached "
        "in fold 8; a higher limit only delays it: keep what each cycle needs from growing (its "
        "batch, chunk, cache or pool is made larger each cycle, and freed at its end).")


# The sample of seed 3: the v1 placement in words, its advisory's fix, the memory maps'
# limit row, the RSS beside the cgroup's charge, the first time window


def test_a_v1_placement_is_a_child_of_the_callers_cgroup_in_words(tmp_path):
    from launcher.cgroups.placement import place

    root = host(tmp_path, {"proc/self/cgroup": "3:pids:/jobs/a\n",
                           "proc/self/mountinfo": (
                               "30 25 0:30 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup "
                               "rw,pids\n"),
                           "sys/fs/cgroup/pids/jobs/a/": ""})
    a = root / "sys/fs/cgroup/pids/jobs/a"
    (placement,) = place(("pids",), root, writable=lambda _p: True, ours={100}).placements
    assert placement.describe() == f"cgroup v1: a child of the caller's cgroup {a}"
    refused = place(("pids",), root, writable=lambda _p: False, ours={100})
    assert refused.placements == ()
    assert refused.advisory == {"pids": (
        f"cannot write {a} (cgroup v1 pids); fix: start launcher in a cgroup of its own "
        f"(`systemd-run --user --scope -p Delegate=yes launcher run ...`) or use --runtime "
        f"docker")}


def test_memory_maps_are_projected_to_the_max_map_count_the_sampler_writes():
    """Rows as the sampler writes them: `maps` and its limit `max_map_count`."""
    from launcher.telemetry import growth, growth_words

    rows = [{"t": float(i), "maps": 1000 + 500 * i, "max_map_count": 5000,
             "cycle": {"unit": "fold", "n": i + 1, "total": None}} for i in range(6)]
    _, _, found = growth.cycle_trends(rows, now=5.5)
    (t,) = found
    assert growth_words.live_line(t, ended=True) == (
        "memory maps +500 per fold (folds 2-6): vm.max_map_count 5,000 reached in fold ~10")


def test_the_rss_beside_the_cgroups_charge_is_not_projected_to_the_memory_limit():
    """The cgroup's working set (memory_bytes) meets the memory limit; the tree's RSS counts
    shared pages once per process: its trend has no limit."""
    from launcher.telemetry import growth
    from tests.growth_runs import rows_of

    rows = rows_of([(100 + 64 * i) << 20 for i in range(8)], key="memory_bytes",
                   limit=1000 << 20, excess=1 << 20)
    for r in rows:
        r["rss_bytes"] = r["memory_bytes"] + (8 << 20)
    _, _, found = growth.cycle_trends(rows, now=7.5)
    trends = {t.series: t.to_json() for t in found}
    assert (trends["memory_bytes"]["limit"], trends["memory_bytes"]["reached"]) == (1000 << 20,
                                                                                    16)
    assert trends["rss_bytes"]["grows"]
    assert (trends["rss_bytes"]["limit"], trends["rss_bytes"]["reached"]) == (None, None)


def test_the_first_time_window_ends_a_window_after_the_start(monkeypatch):
    """Where no line marks a cycle, window 1 is marked at `growth.window` seconds, not at the
    first sample."""
    from launcher.telemetry import growth_watch
    from launcher.telemetry.growth_watch import GrowthOptions, GrowthWatch

    clock = [1000.0]
    monkeypatch.setattr(growth_watch.time, "monotonic", lambda: clock[0])
    watch = GrowthWatch(GrowthOptions(window=30.0), [].append)
    rows = _Rows()
    watch.attach(rows, None)
    for t in (0.5, 29.0, 30.0, 45.0, 60.5):
        clock[0] += 1.0
        watch.on_sample({"t": t})
    assert [(r["cycle"]["unit"], r["cycle"]["n"]) for r in rows.log] == [  # type: ignore[index]
        ("window", 1), ("window", 2)]


def test_time_windows_stop_once_a_line_marks_a_cycle(monkeypatch):
    """Windows stand in for cycles until lines mark two; then the lines' unit alone."""
    from launcher.telemetry import growth_watch
    from launcher.telemetry.growth_watch import GrowthOptions, GrowthWatch

    clock = [1000.0]
    monkeypatch.setattr(growth_watch.time, "monotonic", lambda: clock[0])
    watch = GrowthWatch(GrowthOptions(window=10.0), [].append)
    rows = _Rows()
    watch.attach(rows, None)
    watch.on_sample({"t": 10.0})
    clock[0] += 1.0
    watch.output("stdout", b"epoch 1\n")
    watch.on_sample({"t": 20.0})  # one line is no loop yet: windows go on
    clock[0] += 1.0
    watch.output("stdout", b"epoch 2\n")
    for t in (30.0, 40.0):
        clock[0] += 1.0
        watch.on_sample({"t": t})
    assert [(r["cycle"]["unit"], r["cycle"]["n"]) for r in rows.log] == [  # type: ignore[index]
        ("window", 1), ("epoch", 1), ("window", 2), ("epoch", 2)]


def test_a_stop_says_which_cycle_reaches_the_limit_or_the_one_about_to_start():
    """One cycle's growth to spare: `in fold ~7, so it stops as fold 6 starts` where the limit
    comes in a later cycle, `in fold 6, the one about to start` where it comes in that one."""
    import dataclasses

    from launcher.telemetry.growth_watch import GrowthOptions, GrowthWatch
    from tests.growth_runs import rows_of, threads_trend

    t = threads_trend(rows_of([3, 16, 23, 30], excess=8), now=3.0)
    assert t is not None
    why = ("stopped before fold 6 (--stop-before-limit): threads +7 per fold would pass pids.max "
           "50 ")
    for reached, when in ((7, "in fold ~7, so it stops as fold 6 starts (one fold's growth to "
                              "spare: a fold's peak varies)"),
                          (6, "in fold 6, the one about to start")):
        said: list[str] = []
        watch = GrowthWatch(GrowthOptions(stop=True), said.append)
        watch._stop(dataclasses.replace(t, reached=reached), 6, 5.0)
        assert watch.stopped is not None and watch.stopped["why"] == why + when
        assert said == [f"growth: {why}{when}; SIGTERM now, SIGKILL after 10 s"]


def test_a_pools_fix_is_its_declarations_else_the_generic_one():
    from launcher.telemetry.census import fix_for
    from launcher.threadpools import UNNAMED_FIX, ThreadPool

    pools = (ThreadPool("tf_data", "tf.data", "close each cycle's iterators"),
             ThreadPool("omp_", "OpenMP"))
    assert fix_for("tf.data", pools) == "close each cycle's iterators"
    assert fix_for("OpenMP", pools) == UNNAMED_FIX  # declared without one
    assert fix_for("other", pools) == UNNAMED_FIX


def test_a_failure_line_that_is_not_utf8_is_kept_with_replacement_characters():
    from launcher.telemetry.failures import FailureText

    text = FailureText()
    text.feed(b"MemoryError in \xff\xfe buffer\n")
    assert text.found == {"memory": "MemoryError in \ufffd\ufffd buffer"}


# The sample of seed 4: a deprecated variable alone, the CPUs' fit under a refusal, the pids
# headroom counted from each level's own pids.current


def test_a_deprecated_variable_alone_makes_the_verdict_a_warning(tmp_path):
    prof = tmp_path / "v.yaml"
    prof.write_text("extends: base\nframework: none\nthreads: {intra_op: 1}\n")
    facts = probe_host(LIMITED, environ={})
    assert resolve(load_profile(prof), facts).caps.verdict.level == "ok"
    v = resolve(load_profile(prof), facts, inherited={"OMP_NESTED": "true"}).caps.verdict
    assert (v.level, v.reasons) == (
        "warn", ["OMP_NESTED=true is deprecated; launcher removes it (use "
                 "OMP_MAX_ACTIVE_LEVELS)."])


def test_no_cpu_fit_is_offered_for_a_run_refused_for_its_memory(tmp_path):
    """Oversubscribed pools, and processes beyond the memory budget: smaller pools would not
    lift the refusal, so --fit offers nothing."""
    r, fit = _fit_of(tmp_path, "workers: {processes: 2, memory: 200MiB}\n"
                               "threads: {intra_op: 4}\n")
    assert r.caps.verdict.level == "refuse"
    assert r.caps.verdict.reasons[1] == ("2 processes x 200MiB = 400MiB exceed the 300MiB "
                                         "memory budget; at most 1 fit.")
    assert fit is None
    r, fit = _fit_of(tmp_path, "workers: {processes: 2, memory: 100MiB}\n"
                               "threads: {intra_op: 4}\n")
    assert fit is not None and fit.values == {"threads.intra_op": 1}


def test_the_pids_limit_that_binds_is_the_one_with_the_least_headroom_by_its_own_count(
        tmp_path):
    """The leaf's 50 with 45 in use binds before its parent's 60 with 10: each level's
    pids.current counts, not the limit alone."""
    from launcher.probe.cgroup import pids_binding, read_pids

    host(tmp_path, {"p/leaf/pids.max": "50\n", "p/leaf/pids.current": "45\n",
                    "p/pids.max": "60\n", "p/pids.current": "10\n"})
    chain = Chain("v2", (tmp_path / "p/leaf", tmp_path / "p"))
    assert pids_binding(chain) == (50, 45, tmp_path / "p/leaf")
    assert read_pids(chain) == (50, 45)
    (tmp_path / "p/leaf/pids.current").write_text("5\n")  # 45 free, and 20 above
    (tmp_path / "p/pids.current").write_text("40\n")
    assert read_pids(chain) == (60, 40)


def test_a_malformed_pids_current_is_named_with_its_file(tmp_path):
    from launcher.probe.cgroup import pids_binding

    host(tmp_path, {"leaf/pids.max": "50\n", "leaf/pids.current": "lots\n"})
    with pytest.raises(HostError) as caught:
        pids_binding(Chain("v2", (tmp_path / "leaf",)))
    assert str(caught.value) == f"{tmp_path / 'leaf/pids.current'}: malformed value 'lots'"


def test_a_profile_without_growth_window_gets_windows_that_suit_the_run(tmp_path):
    from launcher.telemetry.growth_watch import GrowthOptions

    prof = tmp_path / "p.yaml"
    prof.write_text("extends: base\n")
    assert GrowthOptions.of(load_profile(prof)).window is None
    prof.write_text("extends: base\ngrowth: {window: 5}\n")
    assert GrowthOptions.of(load_profile(prof)).window == 5.0


def test_the_rows_of_closed_cycles_are_dropped_from_a_samplers_memory(monkeypatch):
    """A long run's rows stay few: at each boundary those before the open cycle go (they are
    in the book's closed cycles, and in telemetry.jsonl)."""
    from launcher.telemetry import growth_watch
    from launcher.telemetry.growth_watch import GrowthOptions, GrowthWatch

    clock = [1000.0]
    monkeypatch.setattr(growth_watch.time, "monotonic", lambda: clock[0])
    watch = GrowthWatch(GrowthOptions(), [].append)
    rows = _Rows()
    watch.attach(rows, None)
    for n in range(1, 5):
        clock[0] += 1.0
        rows.sample()  # a periodic sample inside the cycle
        watch.output("stdout", f"epoch {n}\n".encode())
    assert [r.get("cycle", {}).get("n") for r in rows.rows] == [4]  # type: ignore[union-attr]
    assert [c.n for c in watch.book.closed] == [1, 2, 3]


def test_a_death_at_vm_max_map_count_is_said_of_the_memory_maps_with_their_fix():
    from launcher.telemetry.growth_verdict import growth_record
    from tests.growth_runs import rows_of

    rows = rows_of([1000 + 500 * i for i in range(8)], key="maps", limit=5000, excess=10)
    record = growth_record(rows, {"failure_text": {}}, {"reason": "maps", "diagnosis": "d."},
                           status=134)
    assert record["diagnosis"] == (
        "memory maps grew +500 per fold; vm.max_map_count 5,000 was reached in fold 8; a higher "
        "limit only delays it: free each cycle's mappings (memory-mapped files, allocator "
        "arenas, thread stacks with their threads), or run each cycle in a fresh process.")


@pytest.mark.parametrize(("peak", "reason"), [(973, "files"), (972, None), (1024, "files")])
def test_open_files_sampled_within_5_percent_of_rlimit_nofile_met_it(peak, reason):
    """`Too many open files` with the last cycle's peak at 95% of RLIMIT_NOFILE or more (a
    sample rarely catches the very last descriptor): the files' limit is the reason."""
    from launcher.telemetry import growth
    from launcher.telemetry.growth_verdict import words_reason
    from tests.growth_runs import rows_of

    rows = rows_of([900, 900, 900], key="files", limit=1024, excess=peak - 900)
    _, cycles = growth.cycles_of(rows)
    assert words_reason({"files": "OSError: Too many open files"}, cycles, []) == [reason, None]


def test_a_cycle_line_written_in_two_writes_is_a_cycle_of_its_first(monkeypatch):
    """`python -u`'s print writes a line and its newline apart: a reader that was busy gets
    `cycle 1/5`, then `\\ncycle 2/5\\n` at once. Cycle 1 is of the moment its words came, so
    cycle 2 is a boundary of its own, not one within the debounce of cycle 1."""
    from launcher.telemetry import growth_watch
    from launcher.telemetry.growth_watch import GrowthOptions, GrowthWatch

    clock = [1000.0]
    monkeypatch.setattr(growth_watch.time, "monotonic", lambda: clock[0])
    watch = GrowthWatch(GrowthOptions(), [].append)
    rows = _Rows()
    watch.attach(rows, None)
    watch.output("stdout", b"cycle 1/5")
    clock[0] += 0.3  # the reader was busy: the newline and the next line come together
    watch.output("stdout", b"\ncycle 2/5\n")
    clock[0] += 0.03  # (its next line, read right after the backlog)
    watch.output("stdout", b"cycle 3/5\n")
    assert [r["cycle"]["n"] for r in rows.log] == [1, 2]  # type: ignore[index]
    clock[0] += 0.15
    watch.output("stdout", b"cycle 4/5")
    watch.output("stdout", b"\n", clock[0] + 0.2)  # `came`: when it was read, if earlier
    assert [r["cycle"]["n"] for r in rows.log] == [1, 2, 4]  # type: ignore[index]
    assert not watch.broken and watch.lines.began == {}
