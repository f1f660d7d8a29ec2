"""The tests' shared helpers, in one module (their fixtures are tests/conftest.py's): the CLI
run for real or in process, profiles written to a folder and resolved, what Docker and Podman
lack here, the jobs' workers and ledger, and the leak that tests/test_one_watcher.py,
test_ray.py and test_slurm.py watch. A test file imports what it shares from here, never from
another test file. (The name is older than most of what it holds: other branches import it.)"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, need
from tests.host_trees import LIMITED, limited_host
from tests.polling import wait_until, while_running

BASE = os.environ.get("LAUNCHER_TEST_BASE", "launcher-base:bookworm")


def launcher(*args: str, timeout: float = 600, **kw) -> subprocess.CompletedProcess:  # type: ignore[no-untyped-def]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.update(kw.pop("env", {}))
    return subprocess.run([sys.executable, "-m", "launcher", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, **kw)


def profile(tmp: Path, name: str, text: str) -> str:
    """The profile `text` written as TMP/NAME.yaml (the one way a test writes a profile), its
    path."""
    path = tmp / f"{name}.yaml"
    path.write_text(text)
    return str(path)


def resolved(tmp: Path, text: str, facts: Any = None, name: str = "v", **kw: Any) -> Any:
    """`extends: base` and `text`, written as TMP/NAME.yaml, resolved against `facts` (by
    default the v2-limited fixture host's: 8 CPUs, pids.max 77, a quota of 1.5)."""
    from launcher.caps.resolve import resolve
    from launcher.probe import probe_host
    from launcher.profiles import load_profile

    prof = profile(tmp, name, "extends: base\n" + text)
    return resolve(load_profile(Path(prof)), facts or probe_host(LIMITED, environ={}), **kw)


FRAMEWORK_MODULES = {"none": "numpy", "torch": "torch", "tf": "tensorflow", "jax": "jax"}


def need_framework(framework: str) -> None:
    """The framework's module importable here, or conftest.need's skip (its failure in CI)."""
    module = FRAMEWORK_MODULES[framework]
    need(module, missing_module(module))


def missing_module(name: str) -> str | None:
    """Why Python module `name` cannot be imported here (for conftest.need), or None."""
    if importlib.util.find_spec(name) is None:
        return f"{name} is not installed (scripts/test.sh: pip install -e '.[dev,frameworks,ray]')"
    return None


def run_dir_of(stderr: str) -> Path:
    """The run folder `launcher run` names in its last line."""
    import re

    line = next(x for x in stderr.splitlines() if "telemetry and summary in" in x)
    return Path(re.search(r"`launcher report (.+?)`", line).group(1))  # type: ignore[union-attr]


def compose_bin() -> str:
    return str(Path(sys.executable).parent / "docker-compose")


def docker_missing(image: str = BASE) -> str | None:
    """Why `launcher run --runtime docker --image IMAGE` cannot run here, or None."""
    try:
        import docker

        client = docker.from_env(timeout=120)
        client.ping()
    except Exception as exc:  # noqa: BLE001
        return f"no Docker daemon answers: {exc}"
    try:
        client.images.get(image)
    except Exception as exc:  # noqa: BLE001
        return f"Docker has no image {image} (scripts/test.sh builds it): {exc}"
    return None


def podman(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)


def podman_has_dockers(image: str) -> bool:
    """Podman's store has `image` as Docker's has it (where Docker has it at all)."""
    import shutil

    ours = podman("image", "inspect", "--format", "{{.Id}}", image).stdout.strip()
    theirs = shutil.which("docker") and subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", image], capture_output=True,
        text=True).stdout.strip()
    return bool(ours) and (theirs or "").removeprefix("sha256:") in (ours, "")


def podman_missing(image: str = BASE) -> str | None:
    """Why `launcher run --runtime podman --image IMAGE` cannot run here, or None; the image
    is copied from Docker's store first where Podman's lacks it (as scripts/test.sh does)."""
    import shutil

    if shutil.which("podman") is None:
        return "podman is not installed (apt-get install podman)"
    if not podman_has_dockers(image):
        pulled = podman("pull", "-q", f"docker-daemon:{image}")
        if pulled.returncode != 0:
            return f"cannot copy {image} from Docker into Podman: {pulled.stderr.strip()}"
    return None


def in_process(*args: str, cwd: Path | str | None = None,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    """`launcher ARGS` run in this process (the click group through CliRunner), as launcher()
    returns it: for commands whose output is under test and no process boundary is (plan,
    render, doctor, jobs plan/status/render, report, profiles); a run's signals, cgroups and
    exit file need a real process."""
    from click.testing import CliRunner

    from launcher.cli.main import app

    before = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        r = CliRunner().invoke(app, list(args), env=env)
    finally:
        os.chdir(before)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    return subprocess.CompletedProcess(["launcher", *args], r.exit_code, r.stdout, r.stderr)


# -- jobs: a worker that records what it saw, the ledger, a kill -9 mid-run -------------

PY = str(Path(sys.executable).resolve())
# A worker that records what it saw and when it ran, then sleeps.
WORKER = """\
import json, os, sys, time
t0 = time.time()
time.sleep(float(sys.argv[1]))
out = os.environ["LAUNCHER_CHUNK_OUT"]
rec = {k: os.environ.get(k) for k in ("LAUNCHER_CHUNK_INDEX", "LAUNCHER_CHUNK_START",
       "LAUNCHER_CHUNK_END", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "OMP_NUM_THREADS",
       "LAUNCHER_JOB_ID")}
rec.update(t0=t0, t1=time.time(), argv=sys.argv[2:])
json.dump(rec, open(os.path.join(out, "marker.json"), "w"))
with open(os.path.join(os.environ["MARKS"], "finished.log"), "a") as f:
    f.write(f"{rec['LAUNCHER_CHUNK_START']}-{rec['LAUNCHER_CHUNK_END']}\\n")
"""


def make_job(tmp: Path, text: str, worker: str = WORKER, name: str = "job") -> Path:
    (tmp / "worker.py").write_text(worker)
    (tmp / "marks").mkdir(exist_ok=True)
    spec = tmp / f"{name}.yaml"
    spec.write_text(text)
    return spec


def ledger_rows(folder: Path) -> list[dict]:  # type: ignore[type-arg]
    db = sqlite3.connect(folder / "ledger.sqlite")
    db.row_factory = sqlite3.Row
    return [dict(r) for r in db.execute("SELECT * FROM chunks ORDER BY id")]


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    points = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    best = now = 0
    for _, d in points:
        now += d
        best = max(best, now)
    return best


def covered_once(ranges: list[tuple[int, int]], total: int) -> bool:
    ranges = sorted(ranges)
    return bool(ranges) and ranges[0][0] == 0 and ranges[-1][1] == total and all(
        a[1] == b[0] for a, b in itertools.pairwise(ranges))


def pgrep(pattern: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _what_is(pids: list[int]) -> str:
    """For a failure's message: each process's state, age, parent and command line (the
    workload, or its supervisor, whose command line holds the workload's), and the
    containers running."""
    ps = subprocess.run(["ps", "-o", "pid,ppid,stat,wchan:24,etime,args", "-p",
                         ",".join(map(str, pids))], capture_output=True, text=True).stdout
    parents = {line.split()[1] for line in ps.splitlines()[1:] if line.split()}
    up = subprocess.run(["ps", "-o", "pid,ppid,stat,etime,args", "-p", ",".join(parents)],
                        capture_output=True, text=True).stdout if parents else ""
    containers = subprocess.run(["docker", "ps", "-a", "--format",
                                 "{{.ID}} {{.Status}} {{.Command}}"],
                                capture_output=True, text=True).stdout
    return f"{ps}parents:\n{up}containers:\n{containers}"


def kill_9_after(argv: list[str], log: Path, lines: int, within: float) -> None:
    """Start `launcher ...`, and kill -9 it once `log` has this many finished chunks."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    first = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_until(while_running(first, lambda: log.exists() and
                             len(log.read_text().split()) >= lines), within,
               what=f"{lines} finished chunks")
    first.send_signal(signal.SIGKILL)
    first.wait()


def _started(pid: int) -> float:
    """When `pid` started (the epoch), 0 where it has ended."""
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return 0.0


def kill_mid_run_and_rerun(tmp_path: Path, runtime: str, extra: list[str]) -> None:
    """A job of 30 chunks on `runtime`: launcher killed -9 after 8, its workers gone with it,
    the interrupted chunks said so, and the same command finishing the rest once each."""
    tag = uuid.uuid4().hex[:8]
    python = PY if runtime == "native" else "python3"
    spec = make_job(tmp_path, f"name: k9\ncommand: [{python}, worker.py, '0.4', {tag}]\n"
                              f"items: 60\nchunk_size: 2\noutput: out\n"
                              f"env: {{MARKS: {tmp_path}/marks}}\n")
    cpu = profile(tmp_path, "cpu", "extends: base\njobs: {max_concurrent: 4}\n")
    argv = [sys.executable, "-m", "launcher", "jobs", "run", str(spec), "-p", cpu, "--runtime",
            runtime, *extra]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = tmp_path / "marks/finished.log"
    kill_9_after(argv, log, 8, within=120)
    killed = time.time()
    # a container's worker ends when Docker closes its stdin (the lifeline) and the supervisor
    # stops it: on a busy host (CI beside other work) that took more than 10 s
    grace = 10 if runtime == "native" else 30
    # ... counted from its own start where that came later: a container whose start launcher
    # asked for before the kill, which a busy daemon acted on 30 s after it (CI, stop 54:
    # "Up Less than a second", its worker 0 s old, 30 s after the kill)
    deadline = killed + grace
    while (pids := pgrep(f"worker.py 0.4 {tag}")) and time.time() < min(deadline, killed + 180):
        deadline = max([deadline, *(_started(p) + grace for p in pids)])
        time.sleep(0.2)
    left_over = pgrep(f"worker.py 0.4 {tag}")
    assert left_over == [], (f"a worker outlived launcher, or its own later start, by {grace} "
                             f"s:\n" + _what_is(left_over))
    before = {r["id"]: r for r in ledger_rows(tmp_path / "out")}
    done_before = {i for i, r in before.items() if r["state"] == "done"}
    assert 0 < len(done_before) < 30
    # its runner gone, a chunk marked running is interrupted, not running for ever longer
    left = sorted(i for i, r in before.items() if r["state"] == "running")
    status = in_process("jobs", "status", str(tmp_path / "out"))
    assert status.returncode == 0, status.stderr
    assert f"{len(left)} interrupted" in status.stdout and "running" not in status.stdout
    assert [int(x.split()[2]) for x in status.stdout.splitlines()
            if x.startswith("  interrupted: chunk ")] == left
    second = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-3000:]
    rows = ledger_rows(tmp_path / "out")
    assert len(rows) == 30 and {r["state"] for r in rows} == {"done"}
    # the resumed run's figures are what it ran, beside the job's totals
    ran = [r for r in rows if r["started"] != before[r["id"]]["started"]]
    summary = json.loads((tmp_path / "out/summary.json").read_text())
    assert summary["this_run"]["chunks_done"] == len(ran) < 30
    durations = sorted(r["ended"] - r["started"] for r in ran)
    median = (durations[(len(ran) - 1) // 2] + durations[len(ran) // 2]) / 2
    assert summary["ideal_s"] == pytest.approx(-(-len(ran) // 4) * median, abs=0.01)
    assert f"this run: {len(ran)} chunks done ({2 * len(ran)} items)" in second.stdout
    assert summary["items_done"] == 60 and "30 of 30 chunks done (60 items)" in second.stdout
    lines = [x for x in second.stderr.splitlines() if x.startswith("chunk ")]
    assert " done, 0 failed, 0 running, " in lines[-1]  # the last chunk is not running
    assert lines[-1].split("[")[1].startswith("this run: ") and "job: 60/60 items" in lines[-1]
    assert covered_once([(r["start_item"], r["end_item"]) for r in rows], 60)
    # no finished chunk ran again: the rerun left them as they were, and each wrote once
    assert all(rows[i]["started"] == before[i]["started"] for i in done_before)
    finished = log.read_text().split()
    assert set(finished) == {f"{r['start_item']}-{r['end_item']}" for r in rows}
    for i in done_before:
        assert finished.count(f"{before[i]['start_item']}-{before[i]['end_item']}") == 1


MEM_WORKER = """\
import os, time
n = int(os.environ["LAUNCHER_CHUNK_END"]) - int(os.environ["LAUNCHER_CHUNK_START"])
base = bytearray(40 << 20)           # what the framework costs before any item
data = bytearray(n * (50 << 10))     # 50 KiB per item
for buf in (base, data):
    for i in range(0, len(buf), 4096):
        buf[i] = 1
time.sleep(0.2)
"""


# -- the leak watched every way (test_one_watcher.py, test_ray.py, test_slurm.py) --------

LEAK = ROOT / "examples/growth/leak.py"
LEAK_FILES = ("--files", "4", "--cycles", "300", "--seconds", "0.15")  # dies near cycle 60
LEAK_PROFILE = ("name: watched\nextends: base\nlimits: {pids: 64, nofile: 256}\n"
                "growth: {stop: true}\n")
LEAK_OTHER = "name: small\nextends: base\nlimits: {nofile: 128}\n"


def growth_said(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if ln.startswith("launcher: growth: ")]


def assert_watched(rc: int, out: str, folder: Path, series: str = "open files") -> dict:  # type: ignore[type-arg]
    """Foreseen, stopped with 75 before the limit, and the record read and replayed."""
    said = growth_said(out)
    assert said and series in said[0], out[-3000:]
    assert any("stopped before cycle" in s for s in said), out[-3000:]
    assert rc == 75, (rc, out[-3000:])
    assert "Too many open files" not in out and "can't start new thread" not in out
    summary = json.loads((folder / "summary.json").read_text())
    stopped = summary["growth"]["stopped"]
    assert summary["exit_status"] == 75 and stopped["unit"] == "cycle", summary["growth"]
    assert f"checkpoint written after cycle {stopped['cycle'] - 1}" in out
    assert (folder / "telemetry.jsonl").stat().st_size > 0
    report = in_process("report", str(folder))
    assert report.returncode == 0, report.stderr
    assert "growth per cycle" in report.stdout and "exit status 75" in report.stdout
    other = profile(folder.parent, "small", LEAK_OTHER)
    replay = in_process("report", str(folder), "--profile", other)
    assert replay.returncode == 0, replay.stderr
    return summary  # type: ignore[no-any-return]


def leak_workdir(tmp_path: Path) -> Path:
    """TMP with the leak (leak.py) and its profile (watched.yaml)."""
    shutil.copy(LEAK, tmp_path / "leak.py")
    profile(tmp_path, "watched", LEAK_PROFILE)
    return tmp_path


def leak_chunk_job(tmp_path: Path) -> tuple[Path, Path]:
    """A job of one chunk running the leak, and its profile: (job.yaml, watched.yaml)."""
    work = leak_workdir(tmp_path)
    spec = work / "job.yaml"
    spec.write_text(f"name: w{uuid.uuid4().hex[:6]}\ncommand: [{sys.executable}, "
                    f"{work / 'leak.py'}, {', '.join(LEAK_FILES)}]\nitems: 1\nchunk_size: 1\n"
                    f"retries: 0\noutput: out\n")
    return spec, work / "watched.yaml"


def assert_chunk_watched(proc: subprocess.CompletedProcess[str], tmp_path: Path) -> None:
    """The chunk stopped with 75 (an attempt that failed: retries 0), its record in its
    folder under the job's, read by `launcher report`."""
    assert proc.returncode == 1, proc.stderr[-3000:]
    folder = tmp_path / "out" / "chunks" / "00000"
    log = (folder / "log.txt").read_text()
    assert_watched(75, log, folder)
    status = json.loads(in_process("jobs", "status", str(tmp_path / "out"), "--json").stdout)
    assert status["failures"][0]["diagnosis"].startswith("stopped before cycle"), status


# -- what a run says -----------------------------------------------------------------

HOG = "chunks = []\nwhile True:\n    chunks.append(b'x' * (8 << 20))\n"


def supervisor_sentence(stderr: str) -> str:
    """The supervisor's sentence: the last `launcher: the ...` line."""
    return [x for x in stderr.splitlines() if x.startswith("launcher: the ")][-1]


SUPERVISOR_KILLED = ("launcher: the run's supervisor was killed (SIGKILL) before it recorded "
                     "how the run ended: ")
FROM_OUTSIDE = ("a kill from outside (`docker kill`, a stop timeout, a second Ctrl-C to "
                "launcher); telemetry.jsonl holds the samples it took.")


def memory_kill_said(stderr: str, limit: str) -> None:
    """A memory limit's kill, said: the supervisor's sentence from the OOM counter; or, where
    the kernel's next kill took the supervisor too (a container's supervisor has no
    CAP_SYS_RESOURCE to take itself out of the OOM killer's choice: supervise/spawn.py), the
    host's sentence for a supervisor killed, naming the limit."""
    last = supervisor_sentence(stderr)
    if last.startswith(SUPERVISOR_KILLED):
        assert f"under the memory limit of {limit} the kernel's OOM killer takes it" in last, \
            stderr
        return
    assert last.startswith(f"launcher: the memory limit of {limit} killed the workload: the "
                           f"cgroup's OOM-kill counter rose by"), stderr


# -- the source's structure ----------------------------------------------------------

def launcher_imports(path: Path) -> set[str]:
    """Every launcher module `path` imports, at any depth of its code."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return {m for m in found if m == "launcher" or m.startswith("launcher.")}


# -- caps on the fixture hosts -------------------------------------------------------

def verdict_of(tmp_path: Path, text: str, facts=None) -> tuple[str, list[str]]:  # type: ignore[no-untyped-def]
    v = resolved(tmp_path, text, facts).caps.verdict
    return v.level, v.reasons


def limited_host_of(tmp_path: Path, stack: str, data: str) -> Path:
    return limited_host(tmp_path / f"host-{stack}-{data}", stack=stack, data=data)


# -- the supervisor's evidence, made up ----------------------------------------------

def start_of(**kw: object) -> Any:
    """The supervisor's Start as `kw` says, without reading this host."""
    from launcher.supervise.evidence import Start

    s = object.__new__(Start)
    defaults = dict(nproc=None, address_space=None, data=None, stack=8 << 20, uid=1000,
                    exempt=False, outside=0, threads_max=None, pid_max=None, tasks_before=0)
    s.__dict__.update({**defaults, **kw})
    return s


def watch_of(**kw: object) -> Any:
    """The supervisor's Peaks with `kw` as seen."""
    from launcher.supervise.evidence import Peaks

    w = Peaks(1)
    w.__dict__.update(kw)
    return w
