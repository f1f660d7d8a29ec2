"""The verdict and --fit at their boundaries (issue 21's mutation survivors): equality is not
excess, the words for one thread or one process, the GPU and map-count warnings' conditions, a
limit asked at an outer one's value, and what --fit offers last and says when nothing fits."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from launcher.caps.fit import fit_to_budget, why_nothing_fits
from launcher.probe import probe_host
from tests.conftest import ROOT
from tests.docker_helpers import limited_host_of, resolved, verdict_of

LIMITED = ROOT / "tests/fixtures/hosts/v2-limited"  # 8 CPUs, pids.max 77 (3 running), quota 1.5


ONE = "framework: none\nthreads: {intra_op: 1}\n"  # 1 thread per process (+1 supervisor)


def test_one_thread_and_one_process_are_said_so(tmp_path):
    level, reasons = verdict_of(tmp_path, ONE + "limits: {pids: 1}\n")
    assert level == "refuse" and reasons == [
        "~2 threads (~1 per process + 1 supervisor) would exceed the pids limit 1."]
    level, reasons = verdict_of(tmp_path, "framework: none\nthreads: {intra_op: 2}\n"
                              "limits: {cpuset: '0-1', pids: 2}\n")
    assert reasons == ["~3 threads (~2 per process + 1 supervisor) would exceed the pids limit 2."]
    level, reasons = verdict_of(tmp_path, ONE + "limits: {pids: 2}\nworkers: {processes: 2}\n")
    assert reasons == [
        "~3 threads (2 processes x ~1 + 1 supervisor) would exceed the pids limit 2."]


def test_an_estimate_equal_to_the_budget_warns_and_80_percent_is_ok(tmp_path):
    # 3 processes x 1 + the supervisor = 4
    three = ONE + "workers: {processes: 3}\n"
    assert verdict_of(tmp_path, three + "limits: {pids: 4}\n") == (
        "warn", ["~4 threads (3 processes x ~1 + 1 supervisor) would use 100% of the pids "
                 "limit 4."])
    assert verdict_of(tmp_path, three + "limits: {pids: 5}\n") == ("ok", [])
    assert verdict_of(tmp_path, three + "limits: {pids: 3}\n")[0] == "refuse"


def test_memory_at_the_budget_warns_and_at_90_percent_is_ok(tmp_path):
    base = ONE + "limits: {memory: 200MiB}\nworkers: {processes: 2, memory: %s}\n"
    level, reasons = verdict_of(tmp_path, base % "100MiB")
    assert level == "warn" and reasons[0].startswith("2 processes x 100MiB = 200MiB use 100%")
    assert verdict_of(tmp_path, base % "90MiB") == ("ok", [])
    level, reasons = verdict_of(tmp_path, base % "101MiB")
    assert level == "refuse" and reasons[0].endswith("memory budget; at most 1 fit.")


def _map_count(tmp_path: Path, value: str | None):  # type: ignore[no-untyped-def]
    host = tmp_path / f"maps-{value}"
    shutil.copytree(LIMITED, host)
    knob = host / "proc/sys/vm/max_map_count"
    if value is None:
        knob.unlink()
    else:
        knob.write_text(value + "\n")
    return probe_host(host, environ={})


@pytest.mark.parametrize(("value", "gpus", "warned"), [
    ("65530", 1, True), ("65531", 1, False), (None, 1, True), ("65530", 0, False)])
def test_tf_on_gpus_warns_of_the_map_count_at_the_default_only(tmp_path, value, gpus, warned):
    text = f"framework: tf\ngpu: {{vendor: nvidia, count: {gpus}}}\n"
    _, reasons = verdict_of(tmp_path, text, _map_count(tmp_path, value))
    assert any("vm.max_map_count" in r for r in reasons) == warned, reasons


def test_a_limit_asked_at_the_outer_ones_value_is_not_above_it(tmp_path):
    assert not [r for r in verdict_of(tmp_path, "limits: {pids: 77}\n")[1] if "above" in r]
    above = [r for r in verdict_of(tmp_path, "limits: {pids: 78}\n")[1] if "above" in r]
    assert above == ["limits.pids 78 is above the pids.max 77 of /sys/fs/cgroup/job, which "
                     "binds: the run gets at most 77."]
    cpus = [r for r in verdict_of(tmp_path, "limits: {cpus: 2.5}\n")[1] if "above" in r]
    assert cpus == ["limits.cpus 2.5 is above the CPU quota 1.5 of /sys/fs/cgroup/job, which "
                    "binds: the run gets at most 1.5."]
    cpus = [r for r in verdict_of(tmp_path, "limits: {cpus: 2}\n")[1] if "above" in r]
    assert cpus[0].startswith("limits.cpus 2 is above the CPU quota 1.5 of /sys/fs/cgroup/job,")


# -- --fit ----------------------------------------------------------------------------------

def test_nothing_smaller_to_try_says_what_budget_would_do(tmp_path):
    r = resolved(tmp_path, ONE + "limits: {pids: 1}\n")
    assert fit_to_budget(r) is None
    assert why_nothing_fits(r) == (
        "--fit: nothing smaller to try (none's pools are at their smallest here); needs ~2 "
        "threads, above 80% of the budget 1 (a budget of at least 3).")


def test_torch_is_offered_one_thread_last(tmp_path):
    r = resolved(tmp_path, "framework: torch\nthreads: {intra_op: 4}\nlimits: {pids: 2}\n")
    assert fit_to_budget(r) is None
    assert why_nothing_fits(r).startswith("--fit: nothing fits: even threads.intra_op 1 needs ~")


def test_jax_is_offered_one_cpu_last_from_its_affinity(tmp_path):
    facts = probe_host(LIMITED, environ={})
    for f in (facts, dataclasses.replace(facts, affinity_list=None)):
        r = resolved(tmp_path, "framework: jax\nlimits: {pids: 10}\n", f)
        assert fit_to_budget(r) is None
        said = why_nothing_fits(r)
        assert said.startswith("--fit: nothing fits: even limits.cpuset 0 (CPU 0) needs ~"), said


def test_stacks_are_offered_below_the_current_size_only_and_omp_follows(tmp_path):
    facts = probe_host(limited_host_of(tmp_path, str(4 << 20), str(40 << 20)), environ={})
    r = resolved(tmp_path, "framework: tf\nthreads: {intra_op: 8, omp_stack: 8MiB}\n"
                     "limits: {stack: auto}\n", facts)
    assert r.caps.estimate.stacks.stack == 4 << 20
    fit = fit_to_budget(r)
    assert fit is not None
    assert fit.values["limits.stack"] < 4 << 20  # 4 MiB is no change: not offered
    assert fit.values["threads.omp_stack"] == fit.values["limits.stack"]


def test_stacks_that_never_fit_say_what_they_reserve(tmp_path):
    facts = probe_host(limited_host_of(tmp_path, str(8 << 20), str(1 << 20)), environ={})
    r = resolved(tmp_path, "framework: tf\nthreads: {intra_op: 1}\nlimits: {stack: auto}\n", facts)
    assert fit_to_budget(r) is None
    said = why_nothing_fits(r)
    assert said.startswith("--fit: nothing fits: even limits.stack 1MiB reserves "), said
    assert said.endswith(" of thread stacks, above half of DATA 1MiB.")


def test_the_pids_fit_is_at_most_the_headroom():
    from types import SimpleNamespace

    from launcher.caps.fit import _pids_fit

    def r(total: int, avail: int | None):  # type: ignore[no-untyped-def]
        return SimpleNamespace(caps=SimpleNamespace(budget=SimpleNamespace(available=avail),
                                                    estimate=SimpleNamespace(total=total)))

    assert _pids_fit(r(4, 5), 0.8) and not _pids_fit(r(5, 5), 0.8)
    assert _pids_fit(r(10_000, None), 0.8)


def _largest_fit(tmp_path: Path, text: str, key: str, smaller: object, facts=None):  # type: ignore[no-untyped-def]
    """The pids limit where `key: smaller` just fits and today's setting does not."""
    import math

    r = resolved(tmp_path, text, facts)
    small = r.with_values({key: smaller}, "test").caps.estimate.total
    pids = math.ceil(small / 0.8)
    if r.caps.estimate.total <= 0.8 * pids:
        pytest.skip("no pids limit separates the two here")
    return resolved(tmp_path, text + f"limits: {{pids: {pids}}}\n", facts)


def test_the_largest_pool_one_below_todays_is_offered_first(tmp_path):
    r = _largest_fit(tmp_path, "framework: torch\nthreads: {intra_op: 8}\n",
                     "threads.intra_op", 7)
    fit = fit_to_budget(r)
    assert fit is not None and fit.values == {"threads.intra_op": 7}, fit


def test_jax_is_offered_all_its_cpus_but_one_first(tmp_path):
    facts = dataclasses.replace(probe_host(LIMITED, environ={}), affinity_list=None)
    r = _largest_fit(tmp_path, "framework: jax\n", "limits.cpuset", "0-6", facts)
    fit = fit_to_budget(r)
    assert fit is not None and fit.values == {"limits.cpuset": "0-6"}, fit
    assert fit.cost == "jax's compute runs on 7 of the 8 CPUs it could use"


def test_a_stack_already_at_the_smallest_is_not_offered_again(tmp_path):
    text = "framework: tf\nthreads: {intra_op: 8}\nlimits: {stack: auto}\n"
    probe = resolved(tmp_path, text, probe_host(
        limited_host_of(tmp_path, str(1 << 20), "unlimited"), environ={}))
    assert probe.caps.estimate.stacks.stack == 1 << 20
    four = probe.with_values({"threads.intra_op": 4}, "test").caps.estimate.stacks
    data = 2 * four.reserved  # 4 threads per pool fit in half of it, 8 do not
    facts = probe_host(limited_host_of(tmp_path, str(1 << 20), str(data)), environ={})
    fit = fit_to_budget(resolved(tmp_path, text, facts))
    assert fit is not None and list(fit.values) == ["threads.intra_op"], fit
    assert fit.values["threads.intra_op"] >= 4


def test_the_budget_it_would_need_is_the_least_that_fits(tmp_path):
    # 3 processes x 1 + the supervisor = 4 threads: 80% of 5 is exactly 4
    r = resolved(tmp_path, ONE + "workers: {processes: 3}\nlimits: {pids: 2}\n")
    assert why_nothing_fits(r).endswith("needs ~4 threads, above 80% of the budget 2 (a budget "
                                        "of at least 5).")
