"""Fit the budget instead of refusing it (issue 14): when the pids budget is below the
estimate, plan and run name the largest pool size whose peak fits with headroom, and --fit
applies it: stacks first, then thread counts (JAX's through PJRT_NPROC), then CPUs for JAX
(its codegen pools follow the affinity)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from launcher.caps.fit import HEADROOM, fit_to_budget
from launcher.caps.resolve import resolve
from launcher.probe import probe_host
from launcher.profiles import load_profile
from tests.conftest import ROOT, need
from tests.docker_helpers import launcher, missing_module, profile
from tests.host_trees import limited_host

runner = CliRunner()
LIMITED = ROOT / "tests/fixtures/hosts/v2-limited"  # 8 CPUs of affinity


def _plan(tmp_path, text: str, *extra: str) -> dict:  # type: ignore[type-arg]
    prof = profile(tmp_path, "p", text)
    out = runner.invoke(app_(), ["plan", "-p", prof, "--json", "--host-root",
                                 str(LIMITED), *extra])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def app_():  # type: ignore[no-untyped-def]
    from launcher.cli.main import app

    return app


def test_jax_is_fitted_with_fewer_cpus(tmp_path):
    text = "extends: base\nframework: jax\nlimits: {pids: 40}\n"
    refused = _plan(tmp_path, text)
    assert refused["verdict"]["level"] == "refuse"
    advice = refused["verdict"]["reasons"][-1]
    assert advice.startswith("--fit runs it with limits.cpuset 0-")
    fitted = _plan(tmp_path, text, "--fit")
    assert fitted["verdict"]["level"] == "ok", fitted["verdict"]
    cpuset = fitted["limits"]["cpuset"]
    assert cpuset["source"] == "profile limits.cpuset (--fit)"
    assert fitted["estimate"]["total"] <= HEADROOM * 40
    # the largest that fits: one CPU more would not
    n = int(cpuset["value"].split("-")[-1]) + 1
    more = _plan(tmp_path, text.replace("limits: {", f"limits: {{cpuset: '0-{n}', "))
    assert more["estimate"]["total"] > HEADROOM * 40
    assert fitted["fit"].startswith(f"--fit: limits.cpuset {cpuset['value']} ")


def test_torch_is_fitted_with_fewer_threads(tmp_path):
    facts = probe_host(LIMITED, environ={})
    prof = tmp_path / "t.yaml"
    prof.write_text("extends: base\nframework: torch\nthreads: {intra_op: 8}\n"
                    "limits: {pids: 10}\nworkers: {processes: 2}\n")
    r = resolve(load_profile(prof), facts)
    fit = fit_to_budget(r)
    assert fit is not None and list(fit.values) == ["threads.intra_op"]
    n = fit.values["threads.intra_op"]
    assert r.with_values({"threads.intra_op": n}, "--fit").caps.estimate.total <= 8
    assert r.with_values({"threads.intra_op": n + 1}, "--fit").caps.estimate.total > 8


def test_nothing_fits_and_the_refusal_stands(tmp_path):
    plan = _plan(tmp_path, "extends: base\nframework: jax\nlimits: {pids: 10}\n", "--fit")
    assert plan["verdict"]["level"] == "refuse" and "fit" not in plan
    # it says so, with what the smallest pool would still need
    said = [r for r in plan["verdict"]["reasons"] if r.startswith("--fit")]
    assert len(said) == 1 and ("nothing fits: even limits.cpuset 0 (CPU 0) needs ~" in said[0]
                               or "nothing smaller to try" in said[0]), said


def test_a_fitted_native_run_gets_the_cpus_it_was_given(tmp_path):
    import os

    if len(os.sched_getaffinity(0)) < 2:
        import pytest

        pytest.skip("needs 2 CPUs")
    prof = tmp_path / "p.yaml"  # jax at 2 CPUs peaks at 22 here; at 1 CPU, 16
    prof.write_text("extends: base\nframework: jax\nlimits: {pids: 20}\n")
    code = "import os; print(sorted(os.sched_getaffinity(0)))"
    refused = launcher("run", "--runtime", "native", "-p", str(prof), "--", "python3", "-c",
                       code, cwd=tmp_path)
    assert refused.returncode == 1 and "--fit runs it with limits.cpuset 0" in refused.stderr
    fitted = launcher("run", "--runtime", "native", "-p", str(prof), "--fit", "--", "python3",
                      "-c", code, cwd=tmp_path)
    assert fitted.returncode == 0, fitted.stderr
    assert "--fit: limits.cpuset 0 " in fitted.stderr
    assert fitted.stdout.strip().splitlines()[-1] == "[0]"


def test_the_profiles_limits_fit_fits_only_where_the_preflight_refuses(tmp_path):
    """`limits.fit: true` is the profile's word for what to do instead of refusing (an
    image's entrypoint reads it too); a warning is no refusal, so it changes nothing there."""
    text = ("extends: base\nframework: torch\nthreads: {intra_op: 8}\n"
            "limits: {pids: %d, fit: true}\n")
    refusing = _plan(tmp_path, text % 10)  # ~17 threads against 10: refused, so fitted
    assert refusing["verdict"]["level"] != "refuse", refusing["verdict"]
    assert refusing["threads"]["intra_op"] == 3
    assert refusing["env"]["OMP_NUM_THREADS"]["source"].endswith("(limits.fit)")
    warned = _plan(tmp_path, text % 20)  # ~17 of 20: a warning, left as it is
    assert warned["verdict"]["level"] == "warn", warned["verdict"]
    assert warned["threads"]["intra_op"] == 8
    assert "limits.fit" not in json.dumps(warned["env"])


def _limited_host(tmp_path, data: str = "unlimited", address: str = "unlimited"):  # type: ignore[no-untyped-def]
    return limited_host(tmp_path / "host", address=address, data=data)


def _plan_on(host, tmp_path, text: str, *extra: str) -> dict:  # type: ignore[type-arg]
    prof = profile(tmp_path, "p", text)
    out = runner.invoke(app_(), ["plan", "-p", prof, "--json", "--host-root", str(host),
                                 *extra])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)  # type: ignore[no-any-return]


TORCH8 = "extends: base\nframework: torch\nthreads: {intra_op: 8}\n"


def test_stacks_past_rlimit_data_are_refused_and_fitted_with_smaller_stacks(tmp_path):
    host = _limited_host(tmp_path, data=str(60 << 20))
    plan = _plan_on(host, tmp_path, TORCH8)
    stacks = plan["estimate"]["stacks"]
    assert stacks["stack"] == 8 << 20  # the fixture's RLIMIT_STACK
    assert stacks["reserved"] > 60 << 20
    refusal = [r for r in plan["verdict"]["reasons"] if "RLIMIT_DATA" in r]
    assert plan["verdict"]["level"] == "refuse" and len(refusal) == 1, plan["verdict"]
    omp = stacks["omp_threads"]  # the base profile's threads.omp_stack: 512k
    assert omp > 0 and stacks["omp"] == 512 << 10
    assert refusal[0].startswith(f"{stacks['threads'] - 1 - omp} thread stacks x 8MiB + {omp} "
                                 f"OpenMP x 512KiB = ")
    assert "exceed RLIMIT_DATA 60MiB" in refusal[0]
    # --fit: the largest stack whose reservation takes at most half of it, pools untouched
    fitted = _plan_on(host, tmp_path, TORCH8, "--fit")
    assert fitted["verdict"]["level"] == "ok", fitted["verdict"]
    assert fitted["ulimits"]["stack"]["soft"] == 2 << 20
    assert fitted["threads"]["intra_op"] == 8
    assert fitted["fit"].startswith("--fit: limits.stack 2MiB: thread stacks shrink from 8MiB")
    assert fitted["estimate"]["stacks"]["reserved"] <= (60 << 20) // 2


def test_stacks_taking_most_of_rlimit_data_warn(tmp_path):
    reserved = _plan_on(_limited_host(tmp_path), tmp_path, TORCH8)["estimate"]["stacks"][
        "reserved"]
    for data, level in ((reserved, "warn"), (2 * reserved - 1, "warn"), (2 * reserved, "ok")):
        plan = _plan_on(_limited_host(tmp_path / str(data), data=str(data)), tmp_path, TORCH8)
        assert plan["verdict"]["level"] == level, (data, plan["verdict"])
        if level == "warn":
            assert "% of RLIMIT_DATA" in plan["verdict"]["reasons"][0]
    over = _plan_on(_limited_host(tmp_path / "over", data=str(reserved - 1)), tmp_path, TORCH8)
    assert over["verdict"]["level"] == "refuse"


def test_rlimit_as_counts_the_malloc_arenas_too(tmp_path):
    host = _limited_host(tmp_path, address=str(1 << 30))
    plan = _plan_on(host, tmp_path, TORCH8)
    stacks = plan["estimate"]["stacks"]
    assert stacks["arenas"] == min(stacks["threads"] - 1, 8 * 8 - 1)
    assert stacks["address_space"] == stacks["reserved"] + stacks["arenas"] * (64 << 20)
    said = [r for r in plan["verdict"]["reasons"] if "RLIMIT_AS" in r]
    assert said and "malloc arenas x 64MiB" in said[0] and "MALLOC_ARENA_MAX=2" in said[0]


def test_jax_is_fitted_through_pjrt_nproc_before_its_cpus(tmp_path):
    """PJRT_NPROC sizes XLA's CPU client pools: a budget it can meet keeps every CPU. On this
    host's jax (the 0.10 model: PJRT_NPROC was measured there; a version not installed takes
    the largest model, which never counts those pools below the CPUs), at 2 CPUs."""
    import os

    import pytest

    need("jax", missing_module("jax"))
    if len(os.sched_getaffinity(0)) < 2:  # the host's CPUs: no install gives a second
        pytest.skip("needs 2 CPUs")
    prof = tmp_path / "j.yaml"
    prof.write_text("extends: base\nframework: jax\nthreads: {intra_op: 2}\n"
                    "limits: {cpuset: '0-1', pids: 25}\n")
    r = resolve(load_profile(prof), probe_host("/", environ={}))
    assert r.caps.env["PJRT_NPROC"].value == "2"
    avail = r.caps.budget.available
    assert r.caps.estimate.total > HEADROOM * avail
    fit = fit_to_budget(r)
    assert fit is not None and fit.values == {"threads.intra_op": 1}, fit
    assert "its CPU pools (PJRT_NPROC) shrink from 2 to 1" in fit.describe()
    fitted = r.with_values(fit.values, "--fit")
    assert fitted.caps.env["PJRT_NPROC"].value == "1"
    assert fitted.caps.estimate.total <= HEADROOM * avail
    assert fitted.caps.estimate.breakdown["xla_eigen"] == 1


def test_a_jax_run_fitted_through_pjrt_nproc_completes_under_the_kernels_limit(tmp_path):
    """The fit is real: a profile asking pools of 8 at 2 CPUs (PJRT_NPROC 8 grows XLA's pools
    past the CPUs) is refused under a pids limit of 30; with --fit it runs with a smaller
    PJRT_NPROC on both CPUs, compiles and trains, and the kernel's count of its tasks stays
    within the limit and the estimate."""
    import os
    import sys

    import pytest

    need("jax", missing_module("jax"))
    if len(os.sched_getaffinity(0)) < 2:  # the host's CPUs: no install gives a second
        pytest.skip("needs 2 CPUs")
    prof = tmp_path / "j.yaml"
    prof.write_text("extends: base\nframework: jax\nthreads: {intra_op: 8}\n"
                    "limits: {cpuset: '0-1', pids: 30}\n")
    code = ("from launcher.frameworks import jax as j; j.first_op(); j.train(); import os; "
            "print([open(f'/proc/self/task/{t}/comm').read().strip() "
            "for t in os.listdir('/proc/self/task')].count('tf_XLAEigen'), "
            "os.environ['PJRT_NPROC'], sorted(os.sched_getaffinity(0)))")
    workload = ("--", sys.executable, "-c", code)
    refused = launcher("run", "--runtime", "native", "-p", str(prof), *workload, cwd=tmp_path)
    assert refused.returncode == 1, refused.stderr
    assert "--fit runs it with threads.intra_op " in refused.stderr, refused.stderr
    fitted = launcher("run", "--runtime", "native", "-p", str(prof), "--fit", *workload,
                      cwd=tmp_path)
    assert fitted.returncode == 0, fitted.stderr
    eigen, pjrt, cpus = fitted.stdout.strip().splitlines()[-1].split(" ", 2)
    assert 1 <= int(pjrt) < 8 and eigen == pjrt and cpus == "[0, 1]", fitted.stdout
    from tests.docker_helpers import run_dir_of

    summary = json.loads((run_dir_of(fitted.stderr) / "summary.json").read_text())
    kernel = summary["peaks"]["pids_current"]["kernel_peak"]
    assert kernel is not None and kernel <= summary["peaks"]["threads"]["estimate"] <= 30, \
        summary["peaks"]


def test_the_image_entrypoint_checks_and_fits_stacks_too(tmp_path):
    """The supervisor as an image starts it (its caps.json), under RLIMIT_DATA: without
    `limits.fit` it refuses the stacks before the workload starts, with it the workload starts
    with the smaller RLIMIT_STACK (glibc's default thread stack)."""
    import os
    import subprocess
    import sys

    from launcher.probe import probe_host as live

    code = "import resource; print('stack', resource.getrlimit(resource.RLIMIT_STACK)[0])"
    for fit in (False, True):
        prof = tmp_path / f"img{int(fit)}.yaml"
        prof.write_text(f"extends: base\nframework: tf\nthreads: {{intra_op: 16}}\n"
                        f"limits: {{fit: {str(fit).lower()}}}\n")
        caps = tmp_path / f"caps{int(fit)}.json"
        caps.write_text(json.dumps({"recipe": resolve(load_profile(prof),
                                                      live("/", environ={})).recipe()}))
        env = {**os.environ, "LAUNCHER_CAPS": str(caps), "PYTHONPATH": str(ROOT)}
        proc = subprocess.run(["prlimit", "--data=100000000", "--stack=8388608", sys.executable,
                               "-m", "launcher.supervise", "--", sys.executable, "-c", code],
                              env=env, capture_output=True, text=True, timeout=120)
        if not fit:
            assert proc.returncode == 1 and "stack" not in proc.stdout, proc.stderr
            assert "exceed RLIMIT_DATA 95.4MiB" in proc.stderr, proc.stderr
            assert "refused: not started" in proc.stderr
        else:
            assert proc.returncode == 0, proc.stderr
            assert "limits.fit: limits.stack 1MiB" in proc.stderr, proc.stderr
            assert proc.stdout.split() == ["stack", str(1 << 20)], proc.stdout
