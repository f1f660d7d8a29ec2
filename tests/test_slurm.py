"""Jobs on a real Slurm (scripts/slurm-up.sh: Debian's slurm-wlm, one node, task/cgroup with
ConstrainCores and ConstrainRAMSpace): the chunks are Slurm jobs with the chunk's caps (inside
one: nproc, OMP and torch's threads are its CPUs; its memory limit is the job's --mem), the OOM
kill of Slurm's job memory limit is split like any other, a killed launcher's jobs are taken
over by the next run, and `jobs status` reads each chunk's Slurm job and state."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from launcher.cli.main import app
from tests.conftest import ROOT, need
from tests.docker_helpers import assert_chunk_watched, leak_chunk_job, missing_module, profile
from tests.polling import wait_until, while_running

WORKER = """\
import json, os, sys, time
out = os.environ["LAUNCHER_CHUNK_OUT"]
n = int(os.environ["LAUNCHER_CHUNK_END"]) - int(os.environ["LAUNCHER_CHUNK_START"])
data = bytearray(n * int(os.environ.get("MIB_PER_ITEM", "1")) * (1 << 20))
time.sleep(float(sys.argv[1]))
rec = {"affinity": len(os.sched_getaffinity(0)), "omp": os.environ.get("OMP_NUM_THREADS"),
       "slurm": os.environ.get("SLURM_JOB_ID"), "items": n}
json.dump(rec, open(os.path.join(out, "marker.json"), "w"))
with open(os.environ["MARKS"], "a") as f:
    f.write(f"{n}\\n")
"""


@pytest.fixture(scope="module")
def slurm() -> Iterator[None]:
    """scripts/slurm-up.sh's own cluster, not a Slurm this machine has of its own: SLURM_CONF
    names its slurm.conf (scripts/test.sh exports it; else slurm-up.sh --conf says it here), for
    the tests' sbatch, squeue and scancel and the launchers they start."""
    conf = os.environ.get("SLURM_CONF") or subprocess.run(
        ["bash", str(ROOT / "scripts" / "slurm-up.sh"), "--conf"], capture_output=True,
        text=True).stdout.strip()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SLURM_CONF", conf)
        if shutil.which("sbatch") is None or subprocess.run(
                ["sinfo", "-h", "-o", "%T"], capture_output=True, text=True).stdout.strip() not in (
                "idle", "mixed", "allocated"):
            need("a Slurm cluster", f"none answers at SLURM_CONF={conf} (scripts/slurm-up.sh "
                 f"starts one)")
        yield


def _job(tmp: Path, *, items: int, chunk: int, memory: str, sleep: float = 0.0,
         name: str | None = None, mib_per_item: int = 1) -> tuple[Path, Path]:
    name = name or f"s{uuid.uuid4().hex[:6]}"
    (tmp / "worker.py").write_text(WORKER)
    spec = tmp / "job.yaml"
    spec.write_text(f"name: {name}\ncommand: [{sys.executable}, worker.py, '{sleep}']\n"
                    f"items: {items}\nchunk_size: {chunk}\noutput: out\n"
                    f"env: {{MARKS: {tmp}/marks.log, MIB_PER_ITEM: '{mib_per_item}'}}\n")
    prof = profile(tmp, "p", f"extends: base\nworkers:\n  memory: {memory}\njobs:\n"
                             f"  max_concurrent: 2\n")
    return spec, Path(prof)


# inside the chunk: what a workload sees of its CPUs, and the memory limits above it
INSIDE = """\
import json, os, subprocess, sys
rec = {"nproc": int(subprocess.run(["nproc"], capture_output=True, text=True).stdout),
       "omp": os.environ.get("OMP_NUM_THREADS"), "affinity": len(os.sched_getaffinity(0)),
       "slurm": os.environ.get("SLURM_JOB_ID"), "cgroup": None, "limits": {}}
if os.environ.get("TORCH"):
    import torch
    rec["torch"] = torch.get_num_threads()
for line in open("/proc/self/cgroup"):  # v1 memory controller, else v2's unified line
    _, ctrl, path = line.rstrip("\\n").split(":", 2)
    if "memory" in ctrl.split(",") or (ctrl == "" and rec["cgroup"] is None):
        rec["cgroup"] = (path, ctrl)
path, ctrl = rec["cgroup"]
root, name = (("/sys/fs/cgroup/memory", "memory.limit_in_bytes") if ctrl else
              ("/sys/fs/cgroup", "memory.max"))
while True:  # every level's limit, from the chunk's own cgroup up
    try:
        rec["limits"][path] = open(root + path + "/" + name).read().strip()
    except OSError:
        pass
    if path == "/":
        break
    path = os.path.dirname(path)
pid, chain = os.getppid(), []  # the processes above: which python runs launcher's task
while pid > 1:
    chain.append(open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")[:3])
    pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
rec["task"] = [[a.decode() for a in c] for c in chain if b"launcher.jobs.slurm_task" in c]
with open(os.environ["RECORD"], "a") as f:
    f.write(json.dumps(rec) + "\\n")
data = bytearray(int(os.environ.get("ALLOC_MIB", "0")) << 20)
"""


def _inside_job(tmp: Path, *, caps: str, env: str = "", items: int = 1) -> tuple[Path, Path]:
    (tmp / "inside.py").write_text(INSIDE)
    spec = tmp / "job.yaml"
    spec.write_text(f"name: i{uuid.uuid4().hex[:6]}\ncommand: [{sys.executable}, inside.py]\n"
                    f"items: {items}\nchunk_size: 1\nretries: 0\noutput: out\n"
                    f"env: {{RECORD: {tmp}/inside.jsonl{env}}}\n")
    prof = profile(tmp, "p", f"extends: base\n{caps}jobs:\n  max_concurrent: 2\n")
    return spec, Path(prof)


def _inside(tmp: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in (tmp / "inside.jsonl").read_text().splitlines()]


def _status(target: Path) -> dict:  # type: ignore[type-arg]
    done = _run("jobs", "status", str(target), "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


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
    # `jobs status` beside the ledger: each chunk's Slurm job (the one it ran in) and its state
    st = _status(tmp_path / "out")
    assert st["backend"] == "slurm" and st["external"]["active"] == []
    slurm = st["external"]["chunks"]
    assert [c["chunk"] for c in slurm] == [0, 1, 2, 3]
    assert {c["state"] for c in slurm} == {"COMPLETED"}
    assert sorted(c["job"] for c in slurm) == sorted(m["slurm"] for m in marks)
    text = _run("jobs", "status", str(tmp_path / "out")).stdout
    assert f"Slurm (`launcher-{spec.read_text().split()[1]}`): 4 COMPLETED" in text
    # once the controller forgets them (MinJobAge), sacct has them: here the jobcomp file
    from launcher.jobs.slurm_backend import sacct_states

    ids = [c["job"] for c in slurm]
    assert {i: v["state"] for i, v in sacct_states(ids).items()} == dict.fromkeys(
        ids, "COMPLETED")


def test_slurms_oom_kill_is_split_and_retried(slurm, tmp_path) -> None:
    # 160 MiB at 40 items: killed; 80 MiB at 20, with launcher's task and supervisor beside it
    # in the job (~35 MiB), fits its 130 MiB with room (45 MiB at 1 MiB an item did not always)
    spec, prof = _job(tmp_path, items=40, chunk=40, memory="130MiB", mib_per_item=4)
    done = _run("jobs", "run", str(spec), "-p", str(prof), "--backend", "slurm")
    assert done.returncode == 0, done.stderr
    assert "chunk 0 (items 0-40) was killed by its memory limit" in done.stderr
    assert "1 split" in done.stdout and "0 failed" in done.stdout
    assert sorted(m["items"] for m in _markers(tmp_path)) == [20, 20]
    killed = next((tmp_path / "out" / "slurm").glob("00000-*.log")).read_text()
    assert "oom-kill" in killed  # Slurm's own cgroup did it (slurmstepd says so)


def test_a_killed_launchers_jobs_are_taken_over_by_the_next_run(slurm, tmp_path) -> None:
    name = f"k{uuid.uuid4().hex[:6]}"
    # 6 s chunks: the rerun (an interpreter, the ledger, squeue) finds the killed launcher's
    # next job still queued or running on a busy host too
    spec, prof = _job(tmp_path, items=12, chunk=2, memory="100MiB", sleep=6.0, name=name)
    argv = [sys.executable, "-m", "launcher", "jobs", "run", str(spec), "-p", str(prof),
            "--backend", "slurm"]
    first = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    marks = tmp_path / "marks.log"

    def active() -> list[str]:
        return subprocess.run(["squeue", "-h", "--name", f"launcher-{name}", "-o", "%i"],
                              capture_output=True, text=True).stdout.split()

    # a chunk done, the next one's job queued or running (one at a time here: 2 CPUs a job)
    wait_until(while_running(first, lambda: marks.exists() and marks.read_text().split()
                             and active()), 120, what="a finished chunk and a queued one")
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert active(), "the killed launcher's jobs are still Slurm's"
    done = _run("jobs", "run", str(spec), "-p", str(prof), "--backend", "slurm")
    assert done.returncode == 0, done.stderr
    assert "6 of 6 chunks done (12 items)" in done.stdout
    # the rerun took over the job(s) still queued or running and submitted only
    # the chunks no job had: each chunk one Slurm job across both runs, each run once
    taken = next(x for x in done.stderr.splitlines() if "taken over" in x).split("job(s) ")[1]
    index = tmp_path / "out" / "slurm" / "jobs.jsonl"
    submitted = [json.loads(line) for line in index.read_text().splitlines()]
    assert sorted(r["chunk"] for r in submitted) == list(range(6)), submitted
    assert set(taken.split(";")[0].split(", ")) <= {r["job"] for r in submitted}, taken
    assert sorted(int(n) for n in marks.read_text().split()) == [2] * 6
    wait_until(lambda: not active(), 30, what="no job of the run queued or running")
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


def test_status_reads_each_chunks_slurm_state_and_a_killed_launchers_jobs(slurm,
                                                                         tmp_path) -> None:
    name = f"t{uuid.uuid4().hex[:6]}"
    # two chunks of 2 CPUs on a 2-CPU node: one RUNNING, the other PENDING behind it
    spec, prof = _job(tmp_path, items=2, chunk=1, memory="100MiB", sleep=120.0, name=name)
    argv = [sys.executable, "-m", "launcher", "jobs", "run", str(spec), "-p", str(prof),
            "--backend", "slurm"]
    first = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        _status_while_running_and_after_a_kill(tmp_path, name, first)
    finally:  # a failed assertion leaves no two-minute jobs on the node
        if first.poll() is None:
            first.kill()
        subprocess.run(["scancel", f"--name=launcher-{name}"], check=False)


def _status_while_running_and_after_a_kill(tmp_path: Path, name: str,
                                           first: subprocess.Popen) -> None:  # type: ignore[type-arg]
    try:
        def both_submitted() -> dict | None:  # type: ignore[type-arg]
            if not (tmp_path / "out" / "ledger.sqlite").exists():
                return None
            st = _status(tmp_path / "out")
            states = sorted(c["state"] for c in (st.get("external") or {}).get("chunks", []))
            return st if states == ["PENDING", "RUNNING"] else None

        st = wait_until(while_running(first, both_submitted), 120, interval=0.5,
                        what="one chunk RUNNING in Slurm, the other PENDING")
        assert st["runner"] and st["external"]["name"] == f"launcher-{name}"
        jobs = {c["chunk"]: c["job"] for c in st["external"]["chunks"]}
        assert sorted(a["job"] for a in st["external"]["active"]) == sorted(jobs.values())
        running = subprocess.run(["squeue", "-h", "-t", "running", "--name", f"launcher-{name}",
                                  "-o", "%i"], capture_output=True, text=True).stdout.split()
        assert running == [c["job"] for c in st["external"]["chunks"] if c["state"] ==
                           "RUNNING"]
        text = _run("jobs", "status", str(tmp_path / "out")).stdout
        assert "1 RUNNING, 1 PENDING" in text or "1 PENDING, 1 RUNNING" in text, text
        assert "no launcher runs it" not in text  # one does
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    # the launcher is gone, its jobs are not: status says so, and how to cancel or go on
    text = _run("jobs", "status", str(tmp_path / "out")).stdout
    assert "runner: none; to go on: `launcher jobs run" in text
    assert ("Slurm still has 2 job(s) of this job queued or running though no launcher runs "
            "it") in text, text
    assert f"`scancel --name=launcher-{name}` cancels them alone" in text
    subprocess.run(["scancel", f"--name=launcher-{name}"], check=True)
    st = wait_until(lambda: (s := _status(tmp_path / "out"))["external"]["active"] == [] and s,
                    30, interval=0.5, what="the cancelled jobs to leave Slurm's queue")
    assert {c["state"] for c in st["external"]["chunks"]} == {"CANCELLED"}
    assert "still has" not in _run("jobs", "status", str(tmp_path / "out")).stdout


@pytest.mark.parametrize("threads", ["threads: {intra_op: 1}\n", ""])
def test_inside_a_chunk_nproc_omp_and_torchs_threads_are_its_cpus(slurm, tmp_path,
                                                                   threads) -> None:
    need("torch", missing_module("torch"))
    spec, prof = _inside_job(tmp_path, caps=threads, env=", TORCH: '1'")
    done = _run("jobs", "run", str(spec), "-p", str(prof), "--backend", "slurm")
    assert done.returncode == 0, done.stderr
    cpus = int(done.stderr.split("--cpus-per-task=")[1].split()[0].rstrip(");"))
    assert cpus == (1 if threads else os.cpu_count())
    [rec] = _inside(tmp_path)
    assert rec["slurm"]  # in a Slurm job
    seen = {k: int(rec[k]) for k in ("nproc", "omp", "affinity", "torch")}
    assert seen == dict.fromkeys(seen, cpus), seen
    # launcher's task runs on the driver's python (the venv's: torch is there), not PATH's
    assert rec["task"] and all(t[0] == sys.executable for t in rec["task"]), rec["task"]


def test_the_jobs_memory_limit_binds_under_a_profile_that_asks_for_more(slurm,
                                                                         tmp_path) -> None:
    spec, prof = _inside_job(tmp_path, caps="workers:\n  memory: 400MiB\n",
                             env=", ALLOC_MIB: '150'")
    done = _run("jobs", "run", str(spec), "-p", str(prof), "--backend", "slurm",
                "--sbatch-args=--mem=60M")
    assert done.returncode == 1, done.stderr  # the chunk failed: killed, at its smallest
    # launcher says which figure is in force: the job's --mem, not the profile's 400MiB
    assert (" --mem=60M); its --mem=60M is below the profile's workers.memory (400M): the "
            "job's limit binds") in done.stderr
    assert "the memory limit of 60MiB killed the workload" in done.stderr
    [rec] = _inside(tmp_path)
    limits = {p: int(v) for p, v in rec["limits"].items() if v.isdigit()}  # v2: "max"
    job = next(p for p in limits if p.endswith(f"/job_{rec['slurm']}"))
    own = next(iter(rec["limits"]))  # the chunk's own cgroup, the first read
    assert own.startswith(job + "/"), rec["limits"]  # inside the job's
    # the job's limit is --mem, and none lower anywhere from the chunk's cgroup up: it binds
    assert limits[job] == 60 * 2**20 == min(limits.values()), rec["limits"]
    # Slurm says so too
    [chunk] = _status(tmp_path / "out")["external"]["chunks"]
    assert chunk["job"] == rec["slurm"] and chunk["state"] == "OUT_OF_MEMORY"


@pytest.mark.parametrize("profile", ["", "threads: {intra_op: 1}\n",
                                     "workers:\n  memory: 1GiB\nthreads: {intra_op: 1}\n"])
def test_sbatch_test_only_accepts_each_rendered_script(slurm, tmp_path, profile) -> None:
    spec, _ = _job(tmp_path, items=7, chunk=2, memory="1MiB")
    prof = tmp_path / "q.yaml"
    prof.write_text(f"extends: base\n{profile}")
    out = tmp_path / "render"
    rendered = _run("jobs", "render", str(spec), "-p", str(prof), "--target", "slurm",
                    "--out", str(out))
    assert rendered.returncode == 0, rendered.stderr
    script = next(out.glob("*.sbatch"))
    assert ("#SBATCH --mem=" in script.read_text()) == ("memory" in profile)
    test_only = subprocess.run(["sbatch", "--test-only", str(script)], capture_output=True,
                               text=True)
    assert test_only.returncode == 0, test_only.stderr
    assert "to start at" in test_only.stderr  # sbatch's word that it would run


def test_a_slurm_chunk_is_watched_and_stopped_by_its_supervisor(slurm, tmp_path) -> None:
    """As tests/test_one_watcher.py's local chunk, in a Slurm job step."""

    spec, prof = leak_chunk_job(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "launcher", "jobs", "run", str(spec), "-p",
                           str(prof), "--backend", "slurm"], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert_chunk_watched(proc, tmp_path)
