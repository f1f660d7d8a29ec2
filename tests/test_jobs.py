"""Jobs (issue 8), on this machine with real processes, real cgroups and the real ledger: the
seed-004 fan-out over a 12-GPU host (the rig-6600 host tree) with cap 12 and 4, kill -9 and a
rerun, the OOM split, bench-memory's fit, and clear mistakes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launcher.units import format_size, term
from tests.conftest import HOSTS, ROOT
from tests.docker_helpers import (
    BASE,
    MEM_WORKER,
    PY,
    covered_once,
    in_process,
    kill_mid_run_and_rerun,
    launcher,
    ledger_rows,
    make_job,
    max_overlap,
    profile,
)
from tests.polling import wait_until, while_running


@pytest.mark.parametrize("cap", [12, 4])
def test_seed_004_fan_out_over_12_gpus(cap, tmp_path):
    """98,172 items in chunks of 1,000 on the 12-GPU rig (its captured host tree)."""
    (tmp_path / "rig.yaml").write_text("extends: rig-6600\nworkers: {memory: 300MiB}\n")
    spec = make_job(tmp_path, f"name: seed004\ncommand: [{PY}, worker.py, '0.5', '{{start}}', "
                              f"'{{end}}', '{{index}}', '{{out}}']\nitems: 98172\n"
                              f"chunk_size: 1000\noutput: out\nenv: {{MARKS: {tmp_path}/marks}}\n")
    proc = launcher("jobs", "run", str(spec), "-p", str(tmp_path / "rig.yaml"),
                    "--max-concurrent", str(cap), "--host-root", str(HOSTS / "rig-6600"),
                    timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = ledger_rows(tmp_path / "out")
    assert len(rows) == 99 and {r["state"] for r in rows} == {"done"}
    markers = [json.loads((tmp_path / "out/chunks" / f"{r['id']:05d}/out/marker.json")
                          .read_text()) for r in rows]
    # the ledger and the workers' own markers agree, and every item is covered once
    assert [(int(m["LAUNCHER_CHUNK_START"]), int(m["LAUNCHER_CHUNK_END"])) for m in markers] \
        == [(r["start_item"], r["end_item"]) for r in rows]
    assert covered_once([(r["start_item"], r["end_item"]) for r in rows], 98172)
    finished = (tmp_path / "marks/finished.log").read_text().split()
    assert len(finished) == len(set(finished)) == 99  # each chunk ran to its end once
    # whole arguments substituted, never inside one; {out} is the attempt folder, committed as out
    assert markers[7]["argv"] == ["7000", "8000", "7",
                                  str(tmp_path / "out/chunks/00007/attempt-1")]
    # exactly one GPU visible, and only the GPUs that run get chunks
    assert all(m["ROCR_VISIBLE_DEVICES"].isdigit() and m["HIP_VISIBLE_DEVICES"] == "0"
               for m in markers)  # ROCR picks the GPU; HIP counts from 0 among what is left
    assert {int(m["ROCR_VISIBLE_DEVICES"]) for m in markers} == set(range(cap))
    assert {r["gpu"] for r in rows} == set(range(cap))
    assert all(m["OMP_NUM_THREADS"] == "1" for m in markers)  # the rig's caps, in every chunk
    # never more than the cap at once, and exactly the cap at the busiest moment
    assert max_overlap([(r["started"], r["ended"]) for r in rows]) == cap
    assert max_overlap([(m["t0"], m["t1"]) for m in markers]) <= cap
    summary = json.loads((tmp_path / "out/summary.json").read_text())
    assert summary["counts"]["done"] == 99 and summary["concurrency"] == cap
    assert "wall time" in proc.stdout and "slot use" in proc.stdout


    # (a chunk killed with launcher after it wrote its line, before it exited, runs again:
    # it never finished as far as its exit status goes)


def test_kill_9_of_a_job_then_the_same_command_finishes_it(tmp_path):
    kill_mid_run_and_rerun(tmp_path, "native", [])


@pytest.mark.docker
def test_kill_9_of_a_container_job_then_the_same_command_finishes_it(client, tmp_path):
    kill_mid_run_and_rerun(tmp_path, "docker", ["--image", BASE])


OOM_WORKER = """\
import os
n = int(os.environ["LAUNCHER_CHUNK_END"]) - int(os.environ["LAUNCHER_CHUNK_START"])
data = bytearray(n * (100 << 10))  # 100 KiB per item: 1,000 items pass 96 MiB, 500 do not
for i in range(0, len(data), 4096):
    data[i] = 1
open(os.path.join(os.environ["LAUNCHER_CHUNK_OUT"], "done"), "w").write(str(n))
with open(os.path.join(os.environ["MARKS"], "finished.log"), "a") as f:
    f.write(os.environ["LAUNCHER_CHUNK_START"] + "-" + os.environ["LAUNCHER_CHUNK_END"] + "\\n")
"""


def test_an_oom_killed_chunk_is_split_and_every_item_covered_once(tmp_path):
    (tmp_path / "small.yaml").write_text("extends: base\nworkers: {memory: 96MiB}\n"
                                         "jobs: {max_concurrent: 2}\n")
    spec = make_job(tmp_path, f"name: oom\ncommand: [{PY}, worker.py]\nitems: 3000\n"
                              f"chunk_size: 1000\nmin_chunk_size: 250\nretries: 0\n"
                              f"output: out\nenv: {{MARKS: {tmp_path}/marks}}\n", OOM_WORKER)
    proc = launcher("jobs", "run", str(spec), "-p", str(tmp_path / "small.yaml"), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    rows = ledger_rows(tmp_path / "out")
    split = [r for r in rows if r["state"] == "split"]
    done = [r for r in rows if r["state"] == "done"]
    assert len(split) == 3 and {r["end_item"] - r["start_item"] for r in split} == {1000}
    assert all(r["end_item"] - r["start_item"] == 500 for r in done)
    assert covered_once([(r["start_item"], r["end_item"]) for r in done], 3000)
    finished = (tmp_path / "marks/finished.log").read_text().split()
    assert sorted(finished) == sorted(f"{r['start_item']}-{r['end_item']}" for r in done)
    sentences = sorted(line for line in proc.stdout.splitlines() if "split into chunks" in line)
    assert len(sentences) == 3
    for parent, sentence in zip(split, sentences, strict=True):
        kids = [r for r in rows if r["parent"] == parent["id"]]
        s, e, mid = parent["start_item"], parent["end_item"], kids[0]["end_item"]
        assert sentence.startswith(f"chunk {parent['id']} (items {s}-{e}) was killed by its "
                                   f"memory limit (peak ")
        assert sentence.endswith(f"split into chunks {kids[0]['id']} ({s}-{mid}) and "
                                 f"{kids[1]['id']} ({mid}-{e}).")


def test_bench_memory_predicts_an_unseen_size_and_writes_a_profile(tmp_path):
    spec = make_job(tmp_path, f"name: mem\ncommand: [{PY}, worker.py]\nitems: 20000\n"
                              f"chunk_size: auto\noutput: out\n", MEM_WORKER)
    (tmp_path / "cpu.yaml").write_text("extends: base\njobs: {max_concurrent: 4}\n")
    prof = tmp_path / "measured.yaml"
    fit = launcher("bench-memory", str(spec), "-p", str(tmp_path / "cpu.yaml"), "--sizes",
                   "500,1000,2000", "--predict", "4000", "--json", "--write-profile", str(prof))
    assert fit.returncode == 0, fit.stderr
    data = json.loads(fit.stdout)
    assert {"base_bytes", "per_item_bytes", "fit_error", "predicted_peak_bytes"} <= set(data)
    seen = launcher("bench-memory", str(spec), "-p", str(tmp_path / "cpu.yaml"), "--sizes",
                    "4000,4001", "--json")
    actual = json.loads(seen.stdout)["measurements"][0]["peak"]
    assert abs(data["predicted_peak_bytes"] - actual) / actual < 0.15
    assert abs(data["per_item_bytes"] - (50 << 10)) / (50 << 10) < 0.15
    assert in_process("profiles", "validate", str(prof)).returncode == 0
    plan = json.loads(in_process("jobs", "plan", str(spec), "-p", str(prof), "--json").stdout)
    assert plan["plan"]["chunk_size"] == data["chunk_size"]
    assert plan["plan"]["peak_bytes"] == -(-data["workers_memory_bytes"] // 2**20) * 2**20


def test_bench_memory_says_why_a_size_failed(tmp_path):
    spec = make_job(tmp_path, f"name: mem\ncommand: [{PY}, worker.py]\nitems: 2000\n"
                              f"output: out\n", "import no_such_module_for_launcher\n")
    proc = launcher("bench-memory", str(spec), "-p", "base", "--sizes", "500,1000")
    assert proc.returncode == 1 and proc.stderr.count("\n") == 2, proc.stderr  # + the preamble
    log = tmp_path / "out/bench-memory/chunks/1000000/log.txt"
    assert proc.stderr.splitlines()[-1] == (
        f"error: the worker failed at 500 items: the workload exited with its own status 1. "
        f"Its last line: ModuleNotFoundError: No module named 'no_such_module_for_launcher' "
        f"(log: {log})")
    assert "ModuleNotFoundError" in log.read_text()


def test_bench_memory_measures_the_cgroup_and_writes_no_host_counts(tmp_path):
    """Measured on this host with no GPU for a 12-GPU rig: the profile keeps the fit and a
    chunk size for the rig's 12 slots, and no concurrency from this host's CPUs."""
    spec = make_job(tmp_path, f"name: mem\ncommand: [{PY}, worker.py]\nitems: 20000\n"
                              f"chunk_size: auto\noutput: out\n", MEM_WORKER)
    (tmp_path / "rig.yaml").write_text("extends: rig-6600\n")
    prof = tmp_path / "measured.yaml"
    proc = launcher("bench-memory", str(spec), "-p", str(tmp_path / "rig.yaml"), "--gpus",
                    "none", "--sizes", "500,1000", "--concurrent", "2", "--json",
                    "--write-profile", str(prof))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    for m in data["measurements"]:  # one measure: what the chunk's memory limit sees
        assert m["source"] == "cgroup" and m["peak"] == m["cgroup_peak"]
        assert (f"{m['size']} items: peak {format_size(m['peak'])} (its cgroup's peak, what "
                f"its memory limit sees; tree RSS {format_size(m['rss_peak'])}, for reference "
                f"only)") in proc.stderr
    conc = data["concurrent"]
    assert conc["source"] == "cgroup" and len(conc["rss_peaks_bytes"]) == 2
    assert conc["sum_of_peaks_bytes"] == sum(conc["peaks_bytes"]) and conc["peak_of_total_bytes"]
    text = prof.read_text()
    # not `max_concurrent: 2 (set by CPU slots)` from this 2-CPU host
    assert "max_concurrent" not in text.split("\nname: ")[1]
    assert f"memory: \"{data['workers_memory']}\"" in text  # as shown, to the MiB
    assert data["workers_memory_bytes"] == int(data["workers_memory"][:-3]) << 20
    assert data["chunk_size"] == 1600  # an even share of 20,000 items over the rig's 12 GPUs
    assert f"base {format_size(data['base_bytes'])} ({data['base_bytes']} bytes) " \
           f"{term(data['per_item_bytes'], 'bytes')} per item" in text  # a sign, never `+ -`
    plan = json.loads(in_process("jobs", "plan", str(spec), "-p", str(prof), "--host-root",
                               str(HOSTS / "rig-6600"), "--json").stdout)
    assert plan["plan"]["chunk_size"] == 1600 and plan["plan"]["concurrency"] == 12


def test_failures_are_retried_then_reported_and_a_job_of_failures_stops(tmp_path):
    fail = "import sys; print('no scorer model found', file=sys.stderr); sys.exit(3)\n"
    spec = make_job(tmp_path, f"name: bad\ncommand: [{PY}, worker.py]\nitems: 20\n"
                              f"chunk_size: 1\nretries: 1\noutput: out\n", fail)
    (tmp_path / "cpu.yaml").write_text("extends: base\njobs: {max_concurrent: 1}\n")
    proc = launcher("jobs", "run", str(spec), "-p", str(tmp_path / "cpu.yaml"))
    assert proc.returncode == 1
    rows = ledger_rows(tmp_path / "out")
    failed = [r for r in rows if r["state"] == "failed"]
    assert len(failed) == 3 and all(r["attempts"] == 2 for r in failed)  # 1 retry each
    assert sum(r["state"] == "pending" for r in rows) == 17  # stopped: the rest wait
    assert failed[0]["diagnosis"] == ("the workload exited with its own status 3. Its last "
                                      "line: no scorer model found")
    assert "launcher: the first 3 chunks failed and none succeeded: stopping" in proc.stderr
    status = in_process("jobs", "status", str(tmp_path / "out"), "--json")
    s = json.loads(status.stdout)
    assert s["counts"]["failed"] == 3 and s["failures"][0]["log_tail"].endswith(
        "no scorer model found\nlauncher: the workload exited with its own status 3.")
    text = in_process("jobs", "status", str(tmp_path / "out")).stdout
    assert "-x" not in text and "last run: 0 chunks done (0 items) in wall time " in text
    assert text.rstrip().endswith("no chunk finished, so no ideal to compare with")


def test_a_chunk_that_runs_too_long_is_stopped(tmp_path):
    spec = make_job(tmp_path, "name: slow\ncommand: [sleep, '30']\nitems: 1\n"
                              "timeout: 1s\nretries: 0\noutput: out\n")
    started = time.time()
    proc = launcher("jobs", "run", str(spec), "-p", "base")
    assert proc.returncode == 1 and time.time() - started < 20
    assert "took longer than its 1s timeout" in proc.stdout


def test_job_spec_mistakes_are_one_line_each(tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: ../x\ncomand: [a]\nitems: -5\nchunk_size: big\ntimeout: soon\n"
                    "env: {1X: y}\n")
    proc = in_process("jobs", "plan", str(spec))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [
        f"error: {spec}:2: comand: unknown key; did you mean 'command'?",
        f"error: {spec}:1: command: is required: the program each chunk runs, as a list",
        f"error: {spec}:3: items: must be a whole number of items, or {{file: PATH}} (got -5)",
        f"error: {spec}:4: chunk_size: must be a whole number of items or `auto` (got 'big')",
        f"error: {spec}:5: timeout: must be seconds, or a duration such as 30s, 10m, 2h "
        f"(got 'soon')",
        f"error: {spec}:6: env.1X: not a valid variable name",
        f"error: {spec}:1: name: must be letters, digits, '.', '_' or '-', starting with a "
        f"letter or digit (it names the job's folder and containers) (got '../x')"]
    profiles = tmp_path / "profiles"  # a folder named like that is no profile
    profiles.mkdir()
    (profiles / "empty.yaml").write_text("")
    proc = in_process("jobs", "plan", str(profiles / "empty.yaml"))
    assert proc.stderr == f"error: {profiles}/empty.yaml:1: the job spec is empty\n"


def test_items_from_a_file_and_a_second_launcher_refused(tmp_path):
    (tmp_path / "items.txt").write_text("".join(f"survivor-{i}\n" for i in range(10)))
    spec = make_job(tmp_path, "name: f\ncommand: [sh, -c, 'cp \"$LAUNCHER_CHUNK_FILE\" "
                              "\"$LAUNCHER_CHUNK_OUT/\"; sleep 1']\nitems: {file: items.txt}\n"
                              "chunk_size: 4\noutput: out\n")
    first = subprocess.Popen([sys.executable, "-m", "launcher", "jobs", "run", str(spec), "-p",
                              "base"], env={**os.environ, "PYTHONPATH": str(ROOT)},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # until a chunk runs: the first launcher holds the job's lock
    wait_until(while_running(first, lambda: list((tmp_path / "out/chunks").glob("*/attempt-*"))),
               60, what="the first run's first chunk")
    second = launcher("jobs", "run", str(spec), "-p", "base")
    first.communicate(timeout=120)
    assert first.returncode == 0
    assert second.returncode == 1 and "is running this job already" in second.stderr
    got = [(tmp_path / f"out/chunks/{i:05d}/out/items.txt").read_text().split() for i in range(3)]
    assert got == [[f"survivor-{i}" for i in range(0, 4)], [f"survivor-{i}" for i in range(4, 8)],
                   ["survivor-8", "survivor-9"]]
    again = launcher("jobs", "run", str(spec), "-p", "base")
    assert again.returncode == 0 and "nothing left to run (3 done" in again.stderr


def test_the_seed_004_example_plans_and_refuses_missing_gpus():
    spec = ROOT / "examples/score-survivors/job.yaml"
    plan = in_process("jobs", "plan", str(spec), "--json")
    assert plan.returncode == 0, plan.stderr
    data = json.loads(plan.stdout)
    assert data["plan"]["chunks"] == 99 and data["plan"]["chunk_size"] == 1000
    assert data["plan"]["binding"].startswith("memory")  # 400MiB workers: 9 of 12 fit
    assert "(`jobs run` refuses)" in plan.stderr
    run = launcher("jobs", "run", str(spec))
    assert run.returncode == 1 and "use --gpus none" in run.stderr


def test_ctrl_c_gives_the_chunk_its_attempt_back(tmp_path):
    # first run: the chunk leaves a mark and waits, and Ctrl-C stops it; the rerun's chunk
    # fails, and still has its one retry: an interrupted attempt is not a failed one
    worker = ("import os, sys, time\nmark = os.path.join(os.environ['MARKS'], 'seen')\n"
              "if os.path.exists(mark):\n    sys.exit(3)\nopen(mark, 'w').close()\n"
              "time.sleep(60)\n")
    spec = make_job(tmp_path, f"name: ctrlc\ncommand: [{PY}, worker.py]\nitems: 1\n"
                              f"retries: 1\noutput: out\nenv: {{MARKS: {tmp_path}/marks}}\n",
                    worker)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "launcher", "jobs", "run", str(spec), "-p", "base"]
    first = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    wait_until(while_running(first, (tmp_path / "marks" / "seen").exists), 30,
               what="the chunk to start")
    first.send_signal(signal.SIGINT)
    _, err = first.communicate(timeout=30)
    assert first.returncode != 0 and "stopping the running chunks" in err, err
    [row] = ledger_rows(tmp_path / "out")
    assert (row["state"], row["attempts"], row["diagnosis"]) == ("pending", 0, "interrupted")
    again = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True,
                           timeout=60)
    assert again.returncode == 1
    [row] = ledger_rows(tmp_path / "out")
    assert (row["state"], row["attempts"]) == ("failed", 2)  # its own two attempts


# A worker that writes its output, says so, and (when told to hold) waits to be killed before
# it exits: the moment a chunk has written everything but has not finished.
COMMIT_WORKER = """\
import os, time
idx, out, marks = (os.environ[k] for k in ("LAUNCHER_CHUNK_INDEX", "LAUNCHER_CHUNK_OUT",
                                            "MARKS"))
open(os.path.join(out, "part.txt"), "w").write(idx)
with open(os.path.join(marks, "finished.log"), "a") as f:
    f.write(idx + "\\n")
if os.path.exists(os.path.join(marks, "hold-" + idx)):
    open(os.path.join(marks, "wrote-" + idx + ".tmp"), "w").write(str(os.getpid()))
    os.rename(os.path.join(marks, "wrote-" + idx + ".tmp"), os.path.join(marks, "wrote-" + idx))
    time.sleep(300)
"""


def _commit_job(tmp_path: Path, retries: int) -> list[str]:
    spec = make_job(tmp_path, f"name: commit\ncommand: [{PY}, worker.py]\nitems: 4\n"
                              f"chunk_size: 1\nretries: {retries}\noutput: out\n"
                              f"env: {{MARKS: {tmp_path}/marks}}\n", COMMIT_WORKER)
    one = profile(tmp_path, "one", "extends: base\njobs: {max_concurrent: 1}\n")
    return [sys.executable, "-m", "launcher", "jobs", "run", str(spec), "-p", one]


def _wait_for(path: Path, proc: subprocess.Popen, within: float = 120) -> None:  # type: ignore[type-arg]
    wait_until(while_running(proc, path.exists), within, what=str(path))


def _committed(chunk: Path) -> bool:
    return (chunk / "out/_SUCCESS").is_file() and (chunk / "out/part.txt").is_file()


def test_a_chunk_killed_between_its_write_and_its_exit_leaves_no_output(tmp_path):
    argv = _commit_job(tmp_path, retries=0)
    (tmp_path / "marks/hold-1").touch()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    _wait_for(tmp_path / "marks/wrote-1", run)
    os.kill(int((tmp_path / "marks/wrote-1").read_text()), signal.SIGKILL)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 1, err
    chunks = tmp_path / "out/chunks"
    # it wrote its whole output into its attempt folder, and none of it is committed
    assert not (chunks / "00001/out").exists()
    assert (chunks / "00001/attempt-1/part.txt").read_text() == "1"
    assert all(_committed(chunks / f"{i:05d}") for i in (0, 2, 3))
    assert not list(chunks.glob("0000[023]/attempt-*"))  # moved, not copied
    assert json.loads((chunks / "00002/out/_SUCCESS").read_text())["items"] == [2, 3]
    assert [r["state"] for r in ledger_rows(tmp_path / "out")] == ["done", "failed", "done",
                                                                   "done"]


# `launcher ARGS` whose commit of a chunk's output stops at STEP (before-rename: its attempt
# folder complete, marker included; after-rename: `out` in place, the ledger not told), says
# so with a file `held-STEP` in the chunk's folder, and waits to be killed.
HELD_LAUNCHER = """\
import os, sys, time
from launcher.supervise import commit

step, rename = sys.argv.pop(1), os.rename


class HeldOs:
    def __getattr__(self, name):
        return getattr(os, name)

    @staticmethod
    def rename(src, dst):
        if step == "after-rename":
            rename(src, dst)
        open(os.path.join(os.path.dirname(dst), "held-" + step), "w").close()
        time.sleep(3600)


commit.os = HeldOs()
from launcher.cli.entry import main
main()
"""


@pytest.mark.parametrize("step", ["before-rename", "after-rename"])
def test_kill_9_of_launcher_during_the_commit_then_a_rerun_commits_once(tmp_path, step):
    argv = _commit_job(tmp_path, retries=1)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    held = [sys.executable, "-c", HELD_LAUNCHER, step, *argv[3:]]
    first = subprocess.Popen(held, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True)
    chunk = tmp_path / "out/chunks/00000"
    _wait_for(chunk / f"held-{step}", first)  # the chunk exited 0; launcher is committing it
    first.send_signal(signal.SIGKILL)
    first.wait()
    rows = ledger_rows(tmp_path / "out")
    assert rows[0]["state"] == "running"  # the ledger never said done
    assert _committed(chunk) == (step == "after-rename")  # whole, or not there at all
    assert (chunk / "attempt-1").is_dir() == (step == "before-rename")
    second = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "chunk 0 had finished when its launcher died: its output committed, recorded " \
           "done" in second.stderr
    assert [r["state"] for r in ledger_rows(tmp_path / "out")] == ["done"] * 4
    assert sorted((tmp_path / "marks/finished.log").read_text().split()) == ["0", "1", "2",
                                                                            "3"]  # each once
    for i in range(4):
        assert _committed(tmp_path / f"out/chunks/{i:05d}")
        assert (tmp_path / f"out/chunks/{i:05d}/out/part.txt").read_text() == str(i)
    assert not list((tmp_path / "out/chunks").glob("*/attempt-*"))


def test_a_profile_path_in_a_spec_is_the_specs_folders(tmp_path):
    job = tmp_path / "job2"
    job.mkdir()
    (job / "small.yaml").write_text("extends: base\nworkers: {memory: 100MiB}\n")
    (job / "job.yaml").write_text("name: j\ncommand: ['true']\nitems: 4\nprofile: ./small.yaml\n")
    plan = in_process("jobs", "plan", "job2/job.yaml", "--json", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["profile"] == "small"
    (job / "bad.yaml").write_text("name: j\ncommand: ['true']\nitems: 4\nprofile: ./nope.yaml\n")
    bad = in_process("jobs", "plan", "job2/bad.yaml", cwd=tmp_path)
    assert bad.returncode == 1
    assert bad.stderr == (f"error: job2/bad.yaml:4: profile: no such profile file "
                          f"'{job / 'nope.yaml'}' (got './nope.yaml')\n")


K8S_IMAGE = "registry.example.com/me/three:1"


def _render_three(job: Path, out: Path, nodes: int, items: int = 98172) -> tuple[
        subprocess.CompletedProcess, dict]:  # type: ignore[type-arg]
    import yaml

    (job / "job.yaml").write_text(f"name: three\ncommand: [python3, worker.py]\nitems: {items}\n"
                                  f"chunk_size: 1000\nframework: torch\nprofile: rig-6600\n"
                                  f"nodes: {nodes}\n")
    proc = in_process("jobs", "render", str(job / "job.yaml"), "--out", str(out), "--image",
                    K8S_IMAGE, "--host-root", str(HOSTS / "rig-6600"))
    assert proc.returncode == 0, proc.stderr
    *_, manifest = yaml.safe_load_all((out / "launcher-three.yaml").read_text())
    return proc, manifest


def _context(job: Path, out: Path) -> set[str]:
    """The files `docker build -f OUT/launcher-three.Dockerfile JOB` sends (BuildKit reads the
    Dockerfile's own .dockerignore beside it)."""
    from docker.utils.build import exclude_paths

    ignore = (out / "launcher-three.Dockerfile.dockerignore").read_text().split()
    return set(exclude_paths(str(job), ignore))


def test_a_kubernetes_render_runs_every_nodes_chunks_and_copies_the_job(tmp_path):
    """Three rigs of 12 GPUs, each capped at 9 (400MiB workers): 27 pods at once, not one
    rig's 9; the image holds the job's files, not the render's folder nor its runs."""
    job = tmp_path / "job"
    (job / "runs/jobs/three").mkdir(parents=True)
    (job / "runs/jobs/three/ledger.sqlite").write_text("")
    (job / "worker.py").write_text("print('scored')\n")
    out = job / "k8s"  # the render's folder inside the job's
    proc, manifest = _render_three(job, out, nodes=3)
    assert manifest["spec"]["parallelism"] == 27 and manifest["spec"]["completions"] == 99
    assert "27 at once (3 nodes x each node's cap 9, set by memory" in proc.stdout
    for version in ("1.29", "1.37"):  # the oldest that runs it as written, the newest
        check = subprocess.run([str(Path(sys.executable).parent / "kubernetes-validate"),
                                "--strict", "-k", f"{version}.0",
                                str(out / "launcher-three.yaml")], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
    _render_three(job, out, nodes=3)  # a second render: its own files already there
    assert _context(job, out) == {"worker.py", "job.yaml"}
    # rendered into the job's folder itself: the rendered files stay out, the job's go in
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "worker.py").write_text("print('scored')\n")
    _render_three(alone, alone, nodes=3)
    assert _context(alone, alone) == {"worker.py", "job.yaml"}
    # one node: its cap; more nodes than chunks: every chunk at once
    assert _render_three(job, out, nodes=1)[1]["spec"]["parallelism"] == 9
    assert _render_three(job, out, nodes=3, items=12000)[1]["spec"]["parallelism"] == 12
    plan = json.loads(in_process("jobs", "plan", str(job / "job.yaml"), "--host-root",
                               str(HOSTS / "rig-6600"), "--json").stdout)
    assert (plan["plan"]["concurrency"], plan["plan"]["job_concurrency"]) == (9, 12)


def test_nodes_in_a_spec_is_a_whole_number(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("name: j\ncommand: ['true']\nitems: 4\nnodes: 0\n")
    proc = in_process("jobs", "plan", str(spec))
    assert proc.returncode == 1 and proc.stderr == (
        f"error: {spec}:4: nodes: must be a whole number of machines, 1 or more (got 0)\n")
