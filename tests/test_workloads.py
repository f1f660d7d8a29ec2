"""The reference workloads run natively here with --quick, each with its telemetry files;
tf-train runs each fold in its own process and resumes after the last finished fold."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from launcher.cli.main import app
from launcher.telemetry.sampler import KEYS
from tests.conftest import ROOT
from tests.docker_helpers import in_process, launcher, need_framework, run_dir_of
from tests.polling import wait_until, while_running

runner = CliRunner()


def _check_run_files(run_dir: Path) -> dict:  # type: ignore[type-arg]
    rows = [json.loads(x) for x in (run_dir / "telemetry.jsonl").read_text().splitlines()]
    # every row has every sample's keys; the first (the watch starts at the workload's first
    # words) may add what was read then: the frameworks mapped, the process holding the most
    assert rows and set(KEYS) <= set(rows[0]) <= set(KEYS) | {"loaded", "who", "census",
                                                               "census_t", "memory_bytes"}
    assert max(r["threads"] for r in rows) >= 2
    png = run_dir / "telemetry.png"  # drawn in the background after the run
    wait_until(png.exists, 60, interval=0.2, what="telemetry.png")
    assert png.read_bytes()[:4] == b"\x89PNG"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["exit_status"] == 0
    assert summary["diagnosis"] == "the workload exited with status 0."
    return summary


@pytest.mark.parametrize("phase", [1, 2])
def test_stress_jax(phase):
    need_framework("jax")
    proc = launcher("run", "--runtime", "native", "--interval", "0.5", "stress-jax", "--phase",
                    str(phase), "--quick", "--max-runs", "3")
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_dir = run_dir_of(proc.stderr)
    _check_run_files(run_dir)
    result = json.loads((run_dir / "stress-jax" / f"phase{phase}.json").read_text())
    assert [r["num_envs"] for r in result["runs"]] == [64, 128, 256]
    assert all(r["steps_per_s"] > 0 and r["peak_threads"] > 1 for r in result["runs"])
    assert result["recommended"]["num_envs"] == 256


def test_stress_jax_adapts_to_the_memory_limit(tmp_path):
    need_framework("jax")
    prof = tmp_path / "small.yaml"
    prof.write_text("extends: base\nlimits: {memory: 700MiB}\n")
    proc = launcher("run", "--runtime", "native", "-p", str(prof), "stress-jax", "--phase", "1",
                    "--quick", "--steps", "20000")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "stopped before breaking a limit: num_envs=" in proc.stdout
    run_dir = run_dir_of(proc.stderr)
    result = json.loads((run_dir / "stress-jax" / "phase1.json").read_text())
    assert 1 <= len(result["runs"]) < 5 and result["limits"]["memory_limit"] == 700 << 20


def test_pytorch_phase3():
    need_framework("torch")
    proc = launcher("run", "--runtime", "native", "--interval", "0.5", "pytorch-phase3",
                    "--quick")
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_dir = run_dir_of(proc.stderr)
    _check_run_files(run_dir)
    result = json.loads((run_dir / "pytorch-phase3" / "results.json").read_text())
    assert len(result["points"]) == 4
    best = result["best"]
    assert best["samples_per_s"] == max(p["samples_per_s"] for p in result["points"])


def test_tf_train_folds_in_fresh_processes_and_resume(tmp_path):
    """Results land in the run's own folder; `--resume RUN_ID` reruns there and resumes."""
    need_framework("tf")
    run_id = f"tf-{uuid.uuid4().hex[:6]}"
    out = Path(os.environ["LAUNCHER_RUNS_DIR"]) / run_id / "tf-train"
    work = ["tf-train", "--folds", "3", "--quick"]
    base = [sys.executable, "-m", "launcher", "run", "--runtime", "native"]
    argv = [*base, "--resume", run_id, *work]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    first = subprocess.Popen([*base, "--name", run_id, *work], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    wait_until(while_running(first, (out / "fold-1.json").exists), 240, interval=0.2,
               what="fold 1")
    first.send_signal(signal.SIGINT)  # killed after fold 1
    first.communicate(timeout=120)
    assert first.returncode != 0
    done_before = [k for k in (1, 2, 3) if (out / f"fold-{k}.json").exists()]
    assert done_before[0] == 1 and 3 not in done_before  # fold 2 may have just finished
    pids_before = {k: json.loads((out / f"fold-{k}.json").read_text())["pid"]
                   for k in done_before}
    second = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-2000:]
    skipped = [k for k in (1, 2, 3) if f"tf-train: fold {k}/3 already done" in second.stdout]
    ran = [k for k in (1, 2, 3) if f"tf-train: fold {k}/3 in a fresh process" in second.stdout]
    assert skipped == done_before
    assert ran == [k for k in (1, 2, 3) if k not in done_before]
    agg = json.loads((out / "aggregate.json").read_text())
    assert len(set(agg["pids"])) == 3
    assert {k: agg["pids"][k - 1] for k in done_before} == pids_before
    _check_run_files(run_dir_of(second.stderr))


def test_user_workload_yaml(tmp_path, monkeypatch):
    (tmp_path / "hello.yaml").write_text("name: hello\ndescription: says hello\n"
                                         "command: python3 -c 'print(1)'\nframework: none\n")
    monkeypatch.setenv("LAUNCHER_WORKLOAD_PATH", str(tmp_path))
    result = runner.invoke(app, ["workloads", "--json"])
    assert result.exit_code == 0
    names = {w["name"]: w for w in json.loads(result.stdout)}
    assert {"stress-jax", "pytorch-phase3", "tf-train", "hello"} <= set(names)
    assert names["hello"]["command"] == ["python3", "-c", "print(1)"]
    (tmp_path / "bad.yaml").write_text("name: bad\ncomand: x\n")
    result = runner.invoke(app, ["workloads"])
    assert result.exit_code == 1
    assert result.stderr.strip() == (f"error: {tmp_path / 'bad.yaml'}:2: comand: unknown key "
                                     f"(known: args, command, description, framework, name)")


def test_workload_dry_run_in_docker_mounts_runs():
    result = runner.invoke(app, ["run", "--runtime", "docker", "--image", "img", "--dry-run",
                                 "--json", "tf-train", "--folds", "2"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["spec"]["command"] == ["python3", "-m", "launcher.workloads.tf_train", "--folds",
                                      "2"]
    body = out["request"]["body"]
    assert "PYTHONPATH=/opt/launcher" in body["Env"]
    assert body["Labels"]["launcher.framework"] == "tf"
    runs = str(Path(os.environ["LAUNCHER_RUNS_DIR"]).resolve())
    assert f"{runs}:{runs}:rw" in body["HostConfig"]["Binds"]  # the same path inside and out


def test_readme_lists_each_workloads_flags_from_its_parser():
    """docs/workloads.md's table names exactly the flags each workload's parser has."""
    import re

    from launcher.workloads.catalog import registered

    readme = (ROOT / "docs" / "workloads.md").read_text()
    for name, w in registered().items():
        row = next(line for line in readme.splitlines() if line.startswith(f"| `{name}` |"))
        flags_cell = row.rstrip(" |").rsplit(" | ", 1)[1].replace("\\|", "|")
        listed = re.findall(r"`(--[^`]+)`", flags_cell)
        assert listed == list(w.flags()), name


def test_a_stress_run_writes_the_profile_that_the_next_run_uses(tmp_path):
    need_framework("jax")
    prof = tmp_path / "found.yaml"
    first = launcher("run", "--runtime", "native", "--write-profile", str(prof), "stress-jax",
                     "--phase", "1", "--quick", "--max-runs", "3")
    assert first.returncode == 0, first.stderr[-2000:]
    text = prof.read_text()
    assert "recommended:\n  num_envs: 256\n" in text
    assert text.startswith("# Written by `launcher run stress-jax --write-profile` on ")
    assert "# recommended.num_envs: the largest that ran within the limits" in text
    assert "\nworkers:\n  memory: " in text and "\nthreads:\n  intra_op: " in text
    memory = text.split("\nworkers:\n  memory: ")[1].split("\n")[0].strip('"')
    assert f"+ 25% = {memory}." in text  # the note says the value written
    assert in_process("profiles", "validate", str(prof)).returncode == 0
    plan = json.loads(in_process("plan", "-p", str(prof), "--json").stdout)
    assert plan["framework"] == "jax"  # what it measured, not the base's `none`
    assert plan["env"]["LAUNCHER_NUM_ENVS"]["value"] == "256"
    assert plan["env"]["LAUNCHER_NUM_ENVS"]["source"].startswith(
        f"profile recommended.num_envs ({prof}:")
    second = launcher("run", "--runtime", "native", "-p", str(prof), "stress-jax", "--phase",
                      "1", "--quick")
    assert second.returncode == 0, second.stderr[-2000:]
    result = json.loads((run_dir_of(second.stderr) / "stress-jax" / "phase1.json").read_text())
    assert [r["num_envs"] for r in result["runs"]] == [256]  # the recommendation, not a sweep
    own = launcher("run", "--runtime", "native", "--write-profile", str(tmp_path / "x.yaml"),
                   "--", "true")  # any command: what it measured, no recommended settings
    assert own.returncode == 0 and "recommended" not in (tmp_path / "x.yaml").read_text()
    theirs = tmp_path / "theirs.yaml"
    theirs.write_text("name: theirs\n")
    for target, why in ((theirs, "was not written by launcher"),
                        (prof, "is the profile this run is measured under"),
                        (tmp_path / "found.txt", "must end in .yaml")):
        refused = launcher("run", "--runtime", "native", "-p", str(prof), "--write-profile",
                           str(target), "stress-jax", "--phase", "1", "--quick")
        assert refused.returncode == 1 and why in refused.stderr, refused.stderr
        assert "OMP/MKL" not in refused.stderr  # refused before anything ran
    assert theirs.read_text() == "name: theirs\n"


def test_stress_jax_runs_every_configuration_that_fits_its_pids_limit():
    """A limit set to launcher's estimate (peaks at 0.8-1.0 of it) must not cut the sweep:
    only a next configuration whose threads could pass pids.max is skipped."""
    from launcher.workloads.stress_jax import threads_would_pass

    lim = {"pids_max": 126, "pids_current": 110}
    first = [{"peak_threads": 119}]
    assert threads_would_pass(first, lim, threads=108) is None  # 2 others: 124 left
    assert threads_would_pass(first, {**lim, "pids_current": 114}, threads=108)  # 6 others
    growing = [{"peak_threads": 105}, {"peak_threads": 115}]  # +10 from one to the next
    why = threads_would_pass(growing, lim, threads=108)
    assert why and "+ up to 10 more" in why and "pids.max 126" in why
    assert threads_would_pass(first, {"pids_max": None, "pids_current": 3}, 108) is None
    assert threads_would_pass([], lim, 108) is None


@pytest.mark.parametrize(("flag", "argv"), [
    ("--folds", ["tf-train", "--folds", "0"]), ("--folds", ["tf-train", "--folds", "1"]),
    ("--steps", ["stress-jax", "--steps", "0"]), ("--max-runs", ["stress-jax", "--max-runs", "-1"]),
    ("--num-envs", ["stress-jax", "--num-envs", "0"]),
    ("--max-points", ["pytorch-phase3", "--max-points", "0"]),
    ("--vectorized-envs", ["pytorch-phase3", "--vectorized-envs", "-4", "--batch-size", "16"]),
    ("--batch-size", ["pytorch-phase3", "--batch-size", "x"]),
])
def test_a_nonsense_number_is_a_usage_error_before_any_run_folder(flag, argv):
    """The workload's parser refuses it, so `launcher run` exits 2 before anything starts."""
    runs = Path(os.environ["LAUNCHER_RUNS_DIR"])
    result = runner.invoke(app, ["run", "--runtime", "native", *argv])
    assert result.exit_code == 2, result.output
    assert f"{argv[0]}: error: argument {flag}: " in result.stderr
    assert "launcher:" not in result.output  # no launch line
    assert not any(runs.iterdir())


def _no_framework_warnings(stderr: str) -> None:
    lines = [x for x in stderr.splitlines() if "Warning" in x or "shuffle" in x]
    assert not lines, stderr[-2000:]


def test_pytorch_phase3_prints_no_torch_warning(tmp_path):
    need_framework("torch")
    proc = subprocess.run([sys.executable, "-m", "launcher.workloads.pytorch_phase3", "--quick",
                           "--vectorized-envs", "4", "--batch-size", "16", "--out",
                           str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    _no_framework_warnings(proc.stderr)


def test_tf_train_fold_prints_no_keras_warning(tmp_path):
    """One fold (what each fold process runs): Keras warned that its shuffle=True is ignored
    for the tf.data pipeline, which shuffles itself."""
    need_framework("tf")
    proc = subprocess.run([sys.executable, "-m", "launcher.workloads.tf_train", "--folds", "2",
                           "--quick", "--fold-worker", "1", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "fold-1.json").exists()
    _no_framework_warnings(proc.stderr)


def test_stress_jax_says_why_its_recommendation_is_not_the_fastest():
    from launcher.workloads.stress_jax import recommended_line

    def runs(*rates: int) -> list[dict]:  # type: ignore[type-arg]
        return [{"num_envs": 64 << i, "steps_per_s": r} for i, r in enumerate(rates)]

    assert recommended_line(runs(900_000, 1_200_000, 1_000_000)) == (
        "recommended num_envs 256 (the largest that ran within the limits, at 83% of the "
        "fastest, 128: 1,000,000 vs 1,200,000 steps/s)")
    assert recommended_line(runs(900_000, 1_200_000)) == "recommended num_envs 128 (the fastest)"
    assert recommended_line(runs(5, 5)) == "recommended num_envs 128 (the fastest)"  # a tie
    assert recommended_line(runs(7)) == "recommended num_envs 64 (the only one run)"
    assert recommended_line([]) == "no configuration ran within the limits"
