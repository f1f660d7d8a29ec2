"""A job's ledger belongs to its spec (issue 23): beside it, whichever folder launcher runs
from; `jobs status` takes the spec, says how to go on with a command that works when pasted,
and says a finished job is finished."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT
from tests.docker_helpers import PY, ledger_rows, profile
from tests.polling import wait_until, while_running

# Chunk 2 holds (while MARKS/hold exists) until it is stopped; every chunk that ends says so.
HOLDING = """\
import os, sys, time
idx, marks = os.environ["LAUNCHER_CHUNK_INDEX"], os.environ["MARKS"]
if idx == "2" and os.path.exists(os.path.join(marks, "hold")):
    open(os.path.join(marks, "holding"), "w").close()
    time.sleep(120)
with open(os.path.join(marks, "finished.log"), "a") as f:
    f.write(idx + "\\n")
"""


def _env() -> dict[str, str]:
    """No LAUNCHER_RUNS_DIR: the job's folder is the spec's own default."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("LAUNCHER_RUNS_DIR", None)
    return env


def _launcher(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """A command as printed (`launcher ...`), run in `cwd`."""
    assert argv[0] == "launcher"
    return subprocess.run([sys.executable, "-m", "launcher", *argv[1:]], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=300)


def _hint(text: str, after: str) -> list[str]:
    """The command in backquotes on the line that holds `after`."""
    [line] = [x for x in text.splitlines() if after in x]
    return shlex.split(line.split(after, 1)[1].split("`")[1])


def _job(tmp: Path) -> Path:
    job = tmp / "job"
    (job / "marks").mkdir(parents=True)
    (job / "worker.py").write_text(HOLDING)
    profile(job, "one", "extends: base\njobs: {max_concurrent: 1}\n")
    (job / "job.yaml").write_text(f"name: far\ncommand: [{PY}, worker.py]\nitems: 4\n"
                                  f"chunk_size: 1\nretries: 0\n"
                                  f"env: {{MARKS: {job}/marks}}\n")
    (job / "marks/hold").touch()
    for d in ("a", "b"):
        (tmp / d).mkdir()
    return job


def _interrupt_from(folder: Path, job: Path) -> None:
    first = subprocess.Popen([sys.executable, "-m", "launcher", "jobs", "run", "../job/job.yaml",
                              "--profile", "../job/one.yaml"], cwd=folder, env=_env(),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_until(while_running(first, (job / "marks/holding").exists), 120,
               what="the chunk to hold")
    first.send_signal(signal.SIGINT)
    _, err = first.communicate(timeout=60)
    assert first.returncode == 130, err
    assert f"SIGINT: stopping the running chunks; to go on: `launcher jobs run " \
           f"{job / 'job.yaml'} --profile {job / 'one.yaml'}`" in err


def test_a_job_run_from_another_folder_goes_on_from_its_ledger(tmp_path):
    job = _job(tmp_path)
    _interrupt_from(tmp_path / "a", job)  # chunks 0 and 1 done, 2 stopped, 3 never started
    folder = job / "runs/jobs/far"
    assert [r["state"] for r in ledger_rows(folder)] == ["done", "done", "pending", "pending"]
    assert not (tmp_path / "a/runs").exists()
    (job / "marks/hold").unlink()
    # from folder b, by its spec: not started, and how to go on, as a command
    status = _launcher(["launcher", "jobs", "status", "../job/job.yaml"], tmp_path / "b")
    assert status.returncode == 0, status.stderr
    assert f"job far in {folder}: 2 done, 2 pending" in status.stdout
    rerun = _hint(status.stdout, "runner: none; to go on: ")
    assert rerun[:4] == ["launcher", "jobs", "run", str(job / "job.yaml")]
    assert rerun[4:] == ["--profile", str(job / "one.yaml")]  # as asked for, made absolute
    second = _launcher(rerun, tmp_path / "b")  # pasted in another folder still
    assert second.returncode == 0, second.stderr
    assert "2 chunks pending, 2 done" in second.stderr
    assert (job / "marks/finished.log").read_text().split() == ["0", "1", "2", "3"]  # each once
    assert not (tmp_path / "b/runs").exists()
    # finished: said so, and no rerun hint
    done = _launcher(["launcher", "jobs", "status", str(job / "job.yaml")], tmp_path / "a")
    assert done.stdout.splitlines()[1] == "finished: every chunk done (4 of 4)"
    assert "to go on" not in done.stdout and "rerun" not in done.stdout
    data = json.loads(_launcher(["launcher", "jobs", "status", str(folder), "--json"],
                                tmp_path).stdout)
    assert data["finished"] is True
    last = (folder / "summary.json").read_bytes()
    again = _launcher(["launcher", "jobs", "run", "job.yaml", "-p", "./one.yaml"], job)
    assert again.returncode == 0 and "nothing left to run (4 done" in again.stderr
    assert again.stdout == "" and "chunks pending" not in again.stderr  # one line, no summary
    assert (folder / "summary.json").read_bytes() == last  # the last run's figures stay
    assert _launcher(_hint(again.stderr, "; see "), tmp_path / "b").returncode == 0


def test_status_of_a_spec_that_never_ran_says_how_to_run_it(tmp_path):
    job = _job(tmp_path)
    proc = _launcher(["launcher", "jobs", "status", str(job / "job.yaml")], tmp_path / "a")
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith(f"error: {job / 'job.yaml'}: job far has not run yet (no "
                                  f"ledger in {job / 'runs/jobs/far'}): `launcher jobs run ")


def test_a_finished_job_with_failures_is_finished(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    (job / "job.yaml").write_text("name: bad\ncommand: [sh, -c, 'exit $((LAUNCHER_CHUNK_INDEX "
                                  "% 2))']\nitems: 2\nchunk_size: 1\nretries: 0\n")
    run = _launcher(["launcher", "jobs", "run", str(job / "job.yaml"), "-p", "base"], tmp_path)
    assert run.returncode == 1, run.stderr
    status = _launcher(["launcher", "jobs", "status", str(job / "job.yaml")], tmp_path)
    line = status.stdout.splitlines()[1]
    assert line.startswith("finished: 1 done, 1 failed") and "to go on" not in line
