"""A run sees only the GPUs its profile names (issue 14): a native run with no GPU hides every
vendor's, one with some names exactly those, and a value only a container runtime reads
(NVIDIA_VISIBLE_DEVICES) is never widened from what the run inherited."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner

from launcher.cli.main import app
from tests.conftest import ROOT
from tests.docker_helpers import launcher

runner = CliRunner()
HOSTS = ROOT / "tests/fixtures/hosts"


def _native_env(*args: str) -> dict[str, str]:
    dry = runner.invoke(app, ["run", "--runtime", "native", "--dry-run", "--json", *args,
                              "--", "true"])
    assert dry.exit_code == 0, dry.output
    return json.loads(dry.stdout)["request"]["env_added"]  # type: ignore[no-any-return]


def test_no_gpu_in_the_profile_hides_every_vendors_gpus():
    env = _native_env("-p", "base", "--host-root", str(HOSTS / "docker-5gpu"), "--gpus", "none")
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert env["ROCR_VISIBLE_DEVICES"] == env["HIP_VISIBLE_DEVICES"] == ""
    assert "NVIDIA_VISIBLE_DEVICES" not in env


def test_chosen_gpus_are_named_and_the_container_variables_left_alone():
    env = _native_env("-p", "docker-5gpu", "--host-root", str(HOSTS / "docker-5gpu"),
                      "--gpus", "0,2")
    assert env["CUDA_VISIBLE_DEVICES"] == "0,2"
    assert env["ROCR_VISIBLE_DEVICES"] == ""  # another vendor's: hidden
    assert "NVIDIA_VISIBLE_DEVICES" not in env and "NVIDIA_DRIVER_CAPABILITIES" not in env


def test_a_real_native_run_inherits_no_gpu_and_keeps_a_pods_nvidia_value(tmp_path):
    code = ("import os; print(repr(os.environ.get('CUDA_VISIBLE_DEVICES')), "
            "os.environ.get('NVIDIA_VISIBLE_DEVICES'))")
    proc = launcher("run", "--runtime", "native", "-p", "base", "--gpus", "none", "--",
                    "python3", "-c", code, cwd=tmp_path,
                    env={"CUDA_VISIBLE_DEVICES": "0", "NVIDIA_VISIBLE_DEVICES": "0",
                         "LAUNCHER_RUNS_DIR": str(tmp_path / "runs")})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "'' 0"
    assert os.environ.get("CUDA_VISIBLE_DEVICES") != ""  # ours untouched


def test_dry_run_states_the_estimate_the_run_checks():
    """The estimate a pids limit must cover: the plan's for the framework, plus the
    workload's own threads (stress-jax's sampler), as the real run checks it."""
    args = ["-p", "docker-5gpu", "--host-root", str(HOSTS / "docker-5gpu")]
    dry = runner.invoke(app, ["run", "--runtime", "native", "--dry-run", "--json", *args,
                              "stress-jax", "--phase", "1"])
    assert dry.exit_code == 0, dry.output
    est = json.loads(dry.stdout)["threads_estimate"]
    plan = runner.invoke(app, ["plan", "-f", "jax", "--json", *args])
    assert plan.exit_code == 0, plan.output
    assert est["extra"] == 1
    assert est["total"] == json.loads(plan.stdout)["estimate"]["total"] + 1
    text = runner.invoke(app, ["run", "--runtime", "native", "--dry-run", *args,
                               "stress-jax", "--phase", "1"])
    assert f"threads: ~{est['total']} threads (" in text.stdout
    same = runner.invoke(app, ["plan", "--workload", "stress-jax", "--json", *args])
    assert json.loads(same.stdout)["estimate"]["total"] == est["total"]
