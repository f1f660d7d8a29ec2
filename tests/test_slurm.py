"""Jobs on a real Slurm (scripts/slurm-up.sh: Debian's slurm-wlm, one node, task/cgroup with
ConstrainCores and ConstrainRAMSpace): the chunks are Slurm jobs with the chunk's caps, the OOM
kill of Slurm's job memory limit is split like any other, and a killed launcher's jobs are
taken back by the next run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from launcher.cli.main import app
from tests.conftest import ROOT
from tests.polling import wait_until, while_running

WORKER = """\
import json, os, sys, time
out = os.environ["LAUNCHER_CHUNK_OUT"]
n = int(os.environ["LAUNCHER_CHUNK_END"]) - int(os.environ["LAUNCHER_CHUNK_START"])
data = bytearray(n * (1 << 20))  # 1 MiB per item
time.sleep(float(sys.argv[1]))
rec = {"affinity": len(os.sched_getaffinity(0)), "omp": os.environ.get("OMP_NUM_THREADS"),
       "slurm": os.environ.get("SLURM_JOB_ID"), "items": n}
json.dump(rec, open(os.path.join(out, "marker.json"), "w"))
with open(os.environ["MARKS"], "a") as f:
    f.write(f"{n}\\n")
"""


@pytest.fixture(scope="module")
def slurm() -> None:
    if shutil.which("sbatch") is None or subprocess.run(
            ["sinfo", "-h", "-o", "%T"], capture_output=True, text=True).stdout.strip() not in (
            "idle", "mixed", "allocated"):
        if os.environ.get("CI"):
            pytest.fail("CI needs Slurm: scripts/slurm-up.sh")
        pytest.skip("no Slurm cluster here (scripts/slurm-up.sh starts one)")


def _job(tmp: Path, *, items: int, chunk: int, memory: str, sleep: float = 0.0,
         name: str | None = None) -> tuple[Path, Path]:
    name = name or f"s{uuid.uuid4().hex[:6]}"
    (tmp / "worker.py").write_text(WORKER)
    spec = tmp / "job.yaml"
    spec.write_text(f"name: {name}\ncommand: [{sys.executable}, worker.py, '{sleep}']\n"
                    f"items: {items}\nchunk_size: {chunk}\noutput: out\n"
                    f"env: {{MARKS: {tmp}/marks.log}}\n")
    prof = tmp / "p.yaml"
    prof.write_text(f"extends: base\nworkers:\n  memory: {memory}\njobs:\n  max_concurrent: 2\n")
    return spec, prof


def _markers(tmp: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(p.read_text()) for p in sorted((tmp / "out").glob("chunks/*/out/"
                                                                           "marker.json"))]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "launcher", *args], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_chunks_run_as_slurm_jobs_with_their_caps(slurm, tmp_path) -> None:
    spec, prof = _job(tmp_path, items=40, chunk=10, memory="200MiB")
    done = _run("jobs", "run", str(spec), "-p", str(prof), "--backend", "slurm")
    assert done.returncode == 0, done.stderr
    assert "4 of 4 chunks done (40 items), 0 failed" in done.stdout
    marks = _markers(tmp_path)
    assert len(marks) == 4 and all(m["slurm"] for m in marks)  # each inside a Slurm job
    asked = next(x for x in done.stderr.splitlines() if "Slurm: up to" in x)
    cpus = int(asked.split("--cpus-per-task=")[1].split()[0])
    # Slurm's cpuset (ConstrainCores) is the chunk's CPUs, and its pools are sized for them
    assert all(m["affinity"] == cpus and m["omp"] == str(cpus) for m in marks), marks
    logs = list((tmp_path / "out" / "slurm").glob("*.outcome.json"))
    assert len(logs) == 4


def test_slurms_oom_kill_is_split_and_retried(slurm, tmp_path) -> None:
    spec, prof = _job(tmp_path, items=40, chunk=40, memory="45MiB")  # 40 MiB + python: killed
    done = _run("jobs", "run", str(spec), "-p", str(prof), "--backend", "slurm")
    assert done.returncode == 0, done.stderr
    assert "chunk 0 (items 0-40) was killed by its memory limit" in done.stderr
    assert "1 split" in done.stdout and "0 failed" in done.stdout
    assert sorted(m["items"] for m in _markers(tmp_path)) == [20, 20]
    killed = next((tmp_path / "out" / "slurm").glob("00000-*.log")).read_text()
    assert "oom-kill" in killed  # Slurm's own cgroup did it (slurmstepd says so)


def test_a_killed_launchers_jobs_are_taken_back_by_the_next_run(slurm, tmp_path) -> None:
    name = f"k{uuid.uuid4().hex[:6]}"
    spec, prof = _job(tmp_path, items=12, chunk=2, memory="100MiB", sleep=2.0, name=name)
    argv = [sys.executable, "-m", "launcher", "jobs", "run", str(spec), "-p", str(prof),
            "--backend", "slurm"]
    first = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    marks = tmp_path / "marks.log"
    wait_until(while_running(first, lambda: marks.exists() and len(marks.read_text().split())
                             >= 1), 120, what="a finished chunk")
    first.send_signal(signal.SIGKILL)
    first.wait()
    queued = subprocess.run(["squeue", "-h", "--name", f"launcher-{name}"], capture_output=True,
                            text=True).stdout
    assert queued.strip(), "the killed launcher's jobs are still Slurm's"
    done = _run("jobs", "run", str(spec), "-p", str(prof), "--backend", "slurm")
    assert done.returncode == 0, done.stderr
    assert "6 of 6 chunks done (12 items)" in done.stdout
    time.sleep(1)
    left = subprocess.run(["squeue", "-h", "--name", f"launcher-{name}"], capture_output=True,
                          text=True).stdout
    assert left.strip() == ""  # nothing left queued or running


def test_backend_options_are_the_backends_own(tmp_path) -> None:
    """Slurm's flags are declared by its plugin alone: `jobs run --help` lists them marked
    `(slurm)`, and one given to another backend is refused in one line."""
    spec, prof = _job(tmp_path, items=4, chunk=2, memory="100MiB")
    runner = CliRunner()
    shown = runner.invoke(app, ["jobs", "run", "--help"])
    assert "(slurm) The Slurm partition" in shown.stdout
    assert "(ray) Ray cluster address" in shown.stdout
    local = runner.invoke(app, ["jobs", "run", str(spec), "-p", str(prof), "--partition",
                                "debug"])
    assert local.exit_code == 1
    assert ("--partition is an option of --backend slurm (this job runs on --backend local)"
            in local.stderr)
    if shutil.which("sbatch"):
        wrong = runner.invoke(app, ["jobs", "run", str(spec), "-p", str(prof), "--backend",
                                    "slurm", "--address", "h:1"])
        assert wrong.exit_code == 1
        assert "--address is an option of --backend ray" in wrong.stderr


def test_the_sbatch_render_is_accepted_and_runs_each_chunk(slurm, tmp_path) -> None:
    spec, prof = _job(tmp_path, items=40, chunk=10, memory="100MiB")
    out = tmp_path / "render"
    rendered = _run("jobs", "render", str(spec), "-p", str(prof), "--target", "slurm",
                    "--out", str(out))
    assert rendered.returncode == 0, rendered.stderr
    script = next(out.glob("*.sbatch"))
    text = script.read_text()
    assert "#SBATCH --array=0-3%2" in text and "#SBATCH --mem=100M" in text
    test_only = subprocess.run(["sbatch", "--test-only", str(script)], capture_output=True,
                               text=True)
    assert test_only.returncode == 0, test_only.stderr
    job = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True,
                         check=True).stdout.strip()
    wait_until(lambda: len(list(out.glob("chunk-*.outcome.json"))) == 4, 120,
               what=f"the 4 tasks of Slurm job {job}")
    outcomes = [json.loads(p.read_text()) for p in sorted(out.glob("chunk-*.outcome.json"))]
    assert [o["status"] for o in outcomes] == [0, 0, 0, 0]
    assert len(list((out / "results").glob("chunks/*/out/marker.json"))) == 4
