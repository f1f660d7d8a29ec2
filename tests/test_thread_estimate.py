"""The plan's thread estimate equals the real count after import and a first operation.

Each case starts a fresh interpreter with exactly the plan's environment (as the entrypoint
would), imports the framework, runs a matmul (jit for JAX) and counts /proc/self/task.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from launcher.caps.resolve import resolve
from launcher.probe import probe_host
from launcher.profiles import load_profile
from launcher.variables import managed
from tests.conftest import ROOT

MODULES = {"none": "numpy", "torch": "torch", "tf": "tensorflow", "jax": "jax"}


def _need(framework: str) -> None:
    if importlib.util.find_spec(MODULES[framework]) is None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must install {MODULES[framework]}")
        pytest.skip(f"{MODULES[framework]} is not installed")


def count_threads(framework: str, env: dict[str, str], cpu: int | None = None) -> int:
    base = {k: v for k, v in os.environ.items() if k not in managed()}
    proc = subprocess.run(
        [sys.executable, "-m", "launcher.workloads.threadprobe", framework],
        env={**base, **env, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"},
        capture_output=True, text=True, timeout=300, check=True,
        preexec_fn=(lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])["threads"]


@pytest.mark.parametrize("framework", ["none", "torch", "tf", "jax"])
@pytest.mark.parametrize("intra", [1, 2])
def test_estimate_matches_real_threads(framework, intra, tmp_path):
    _need(framework)
    path = tmp_path / "t.yaml"
    path.write_text(f"extends: base\nthreads:\n  intra_op: {intra}\n")
    facts = probe_host("/", environ={})
    if facts.affinity_cpus < 2:
        pytest.skip("needs 2 CPUs")
    caps = resolve(load_profile(path), facts, framework=framework).caps
    assert count_threads(framework, caps.environment()) == caps.estimate["per_process"]


@pytest.mark.parametrize("framework", ["none", "torch", "tf", "jax"])
def test_estimate_with_one_cpu_of_affinity(framework):
    """Pinned to one CPU (as --cpuset-cpus would), with the auto profile."""
    _need(framework)
    facts = probe_host("/", environ={})
    cpu = min(os.sched_getaffinity(0))
    facts = dataclasses.replace(facts, affinity_cpus=1, effective_cpus=1)
    caps = resolve(load_profile("base"), facts, framework=framework).caps
    assert count_threads(framework, caps.environment(), cpu) == caps.estimate["per_process"]
