"""Fit the budget instead of refusing it (issue 14): when the pids budget is below the
estimate, plan and run name the largest pool size whose peak fits with headroom, and --fit
applies it: CPUs for JAX (its pools follow the affinity), thread counts for the others."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from launcher.caps.fit import HEADROOM, fit_to_budget
from launcher.caps.resolve import resolve
from launcher.probe import probe_host
from launcher.profiles import load_profile
from tests.conftest import ROOT
from tests.docker_helpers import launcher

runner = CliRunner()
LIMITED = ROOT / "tests/fixtures/hosts/v2-limited"  # 8 CPUs of affinity


def _plan(tmp_path, text: str, *extra: str) -> dict:  # type: ignore[type-arg]
    prof = tmp_path / "p.yaml"
    prof.write_text(text)
    out = runner.invoke(app_(), ["plan", "-p", str(prof), "--json", "--host-root",
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
    assert fit is not None and fit.key == "threads.intra_op"
    assert r.with_values({fit.key: fit.value}, "--fit").caps.estimate["total"] <= 8
    assert r.with_values({fit.key: fit.value + 1}, "--fit").caps.estimate["total"] > 8


def test_nothing_fits_and_the_refusal_stands(tmp_path):
    plan = _plan(tmp_path, "extends: base\nframework: jax\nlimits: {pids: 10}\n", "--fit")
    assert plan["verdict"]["level"] == "refuse" and "fit" not in plan
    # it says so, with what the smallest pool would still need
    said = [r for r in plan["verdict"]["reasons"] if r.startswith("--fit")]
    assert len(said) == 1 and ("nothing fits: even limits.cpuset 0 needs ~" in said[0]
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
