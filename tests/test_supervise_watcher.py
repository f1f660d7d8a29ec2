"""launcher/supervise/watcher.py, driven directly as the supervisor's loop drives it: where the
run record goes (record_folder, make_folder, begin), the watch of a real child (start: its
rows, its limits, its memory cgroup; output: its cycles; tick: the next sample, the SIGKILL
after a stop's grace), the end (finish: the growth record, summary.json; quick_record) and a
pod's termination message. The watch samples the tree of the process that runs it: what
signals "the whole tree" runs in a Python process of its own."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from launcher import contract as c
from launcher.frameworks import get
from launcher.supervise import watcher
from launcher.supervise.watcher import Watcher, make_folder, quick_record, record_folder
from launcher.telemetry.watch_settings import WatchSettings
from tests.conftest import ROOT, need
from tests.polling import wait_until

PY = sys.executable
EXITED = "the workload exited with status 1."


def rows_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def zombie(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rpartition(")")[2].split()[0] == "Z"


def rmdir(d: Path) -> bool:
    try:
        d.rmdir()
        return True
    except OSError:
        return False


def memory_cgroup() -> Path | None:
    """This process's cgroup v1 memory directory, where the host has one."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            d = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            return d if (d / "memory.limit_in_bytes").exists() else None
    return None


# --- where the record goes --------------------------------------------------------------


def test_the_record_goes_where_named_else_into_a_new_folder_under_a_runs_folder(tmp_path):
    cmd = ["/usr/bin/python3", "-c"]
    assert record_folder({c.RECORD_DIR: "/r/a", "LAUNCHER_RUN_DIR": "/r/b"}, cmd) == (
        Path("/r/a"), False)
    assert record_folder({c.RECORD_DIR: "", "LAUNCHER_RUN_DIR": "/r/b",
                          "LAUNCHER_RUNS_DIR": "/r/c"}, cmd) == (Path("/r/b"), False)
    assert record_folder({}, cmd) == (None, False)
    assert record_folder({"LAUNCHER_RUNS_DIR": ""}, cmd) == (None, False)
    host = "".join(ch for ch in os.uname().nodename if ch.isalnum() or ch in "-_")[:24]
    tail = f"-{re.escape(host)}" if host else ""
    folder, new = record_folder({"LAUNCHER_RUNS_DIR": str(tmp_path)}, cmd)
    assert new and folder is not None and folder.parent == tmp_path
    assert re.fullmatch(rf"\d{{8}}-\d{{6}}-python3{tail}", folder.name), folder.name
    folder, new = record_folder({"RUNPOD_POD_ID": "x"}, ["dir/"])  # a pod's volume
    assert new and folder is not None and folder.parent == Path("/workspace/runs")
    assert re.fullmatch(rf"\d{{8}}-\d{{6}}-run{tail}", folder.name), folder.name


def test_the_hosts_name_in_a_new_record_folder_keeps_24_letters_digits_dashes(root):
    """In a UTS namespace of its own, with a hostname chosen for it."""
    need("unshare (util-linux)", None if shutil.which("unshare") else "not on PATH")
    code = ("import socket, sys; socket.sethostname(sys.argv[1]); "
            "from launcher.supervise.watcher import record_folder; "
            "print(record_folder({'LAUNCHER_RUNS_DIR': '/r'}, ['w'])[0].name)")
    names = []
    for host in ("a.b-c_d" + "x" * 30, "..."):
        proc = subprocess.run(["unshare", "--uts", PY, "-c", code, host], capture_output=True,
                              text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert proc.returncode == 0, proc.stderr
        names.append(proc.stdout.strip())
    assert re.fullmatch(r"\d{8}-\d{6}-w-ab-c_dx{18}", names[0]), names[0]
    assert re.fullmatch(r"\d{8}-\d{6}-w", names[1]), names[1]  # nothing left of it: no dash


def test_a_named_folder_is_kept_and_a_new_one_gets_a_suffix_up_to_99(tmp_path):
    named = tmp_path / "a" / "b"
    assert make_folder(named, False) == named and named.is_dir()
    assert make_folder(named, False) == named  # the last start's record
    new = tmp_path / "runs" / "x" / "run"
    assert make_folder(new, True) == new and new.is_dir()
    assert make_folder(new, True) == new.with_name("run-1")  # a start in the same second
    assert make_folder(new, True) == new.with_name("run-2")
    for n in range(3, 100):
        new.with_name(f"run-{n}").mkdir()
    with pytest.raises(FileExistsError, match="and 99 more exist"):
        make_folder(new, True)
    assert not new.with_name("run-100").exists()


def test_begin_says_why_there_is_no_record_and_watches_all_the_same(tmp_path):
    (tmp_path / "file").write_text("")
    said: list[str] = []
    settings = WatchSettings()
    where = tmp_path / "file" / "run"
    w = Watcher.begin({"LAUNCHER_RUN_DIR": str(where)}, ["w"], said.append, settings)
    assert said == [f"warning: no run record: cannot create {where}: Not a directory"]
    assert w.folder is None and w.settings is settings and w.command == ["w"]
    w = Watcher.begin({"LAUNCHER_RUNS_DIR": str(tmp_path / "runs")}, ["w"], said.append,
                      settings)
    assert w.folder is not None and w.folder.is_dir() and w.folder.parent == tmp_path / "runs"
    assert w.say == said.append and len(said) == 1


# --- the watch ------------------------------------------------------------------------------


def test_without_psutil_nothing_is_sampled_yet_the_record_is_written(tmp_path):
    settings = WatchSettings(interval=0.2)
    settings.sample = False
    w = Watcher.begin({"LAUNCHER_RUN_DIR": str(tmp_path / "run")}, ["w"], lambda _: None,
                      settings)
    w.start(os.getpid(), [])
    assert w.pid == os.getpid() and w.sampler is None
    assert w.tick() == 1.0  # nothing to sample: a tick a second
    w.exited()
    assert w.ended_at is None
    status, sentence, record = w.finish(1, EXITED, {"reason": "exit"}, {})
    assert (status, sentence) == (1, EXITED) and "error" not in record
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["samples"] == 0 and summary["exit_status"] == 1


def test_the_watch_samples_the_tree_marks_cycles_and_writes_the_record(tmp_path):
    said: list[str] = []
    settings = WatchSettings(interval=1.0, estimate={"total": 1}, profile="p")
    kid = subprocess.Popen(["sleep", "30"])
    try:
        w = Watcher.begin({"LAUNCHER_RUN_DIR": str(tmp_path / "run")}, ["sleep", "30"],
                          said.append, settings)
        before = time.time()
        w.start(kid.pid, [])
        telemetry = tmp_path / "run" / "telemetry.jsonl"
        first = rows_of(telemetry)
        assert len(first) == 1 and w.pid == kid.pid
        row = first[0]
        assert row["processes"] == 1  # the workload: the supervisor is the root, not counted
        assert row["max_map_count"] == int(Path("/proc/sys/vm/max_map_count").read_text())
        assert isinstance(row["memory_limit_bytes"], int) and row["memory_limit_bytes"] > 0
        assert "memory_bytes" not in row  # not the run's own memory cgroup
        assert w.tick() == 1.0 and len(rows_of(telemetry)) == 1  # none due yet
        base = time.monotonic() - 10
        fed = 0
        for k in range(1, 6):  # read a second apart: five cycles
            data = f"epoch {k}\n".encode()
            w.output("stdout", data, base + k)
            fed += len(data)
        failure = b"RuntimeError: can't start new thread\n"
        w.output("stderr", failure)
        fed += len(failure)
        assert sum(1 for r in rows_of(telemetry) if r.get("cycle")) == 5
        n = len(rows_of(telemetry))
        wait_until(lambda: w.tick() and len(rows_of(telemetry)) > n, timeout=30,
                   what="a tick's sample")
        w._kill_later(100.0)  # a stop's SIGKILL, due long after the run's end
    finally:
        kid.kill()
        kid.wait()
    w.exited()
    assert w.ended_at is not None and 0 < w.ended_at < time.time() - before + 1
    ended = {"reason": "exit", "diagnosis": EXITED, "limits_at_start": {"pids_max": 64}}
    status, sentence, record = w.finish(1, EXITED, ended, {"pids_peak_kernel": 5})
    assert w.kill_at is None and w.out is not None and w.out.closed
    assert len(said) == 1 and re.fullmatch(  # the tree's: the workload's and ours
        r"warning: threads at \d+ passed the plan's estimate of 1", said[0]), said
    assert status == 1 and "status" not in record and "error" not in record
    assert record["unit"] == "epoch" and record["cycles_count"] == 5
    assert sentence == record["diagnosis"]  # the growth's sentence: its likeliest limit
    assert sentence.startswith("the workload exited with status 1; ") and "pids.max 64" in sentence
    assert record["output"]["read_bytes"] == fed
    rows = rows_of(telemetry)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["started"] == w.started and w.started <= summary["ended"] <= time.time()
    assert summary["samples"] == len(rows) and summary["duration_s"] == rows[-1]["t"]
    assert summary["peaks"]["pids_current"]["kernel_peak"] == 5
    assert summary["growth"] == json.loads(json.dumps(record))
    del summary["started"], summary["ended"], summary["growth"], summary["peaks"]
    del summary["duration_s"], summary["gpus"]
    assert summary == {"run_id": "run", "profile": "p", "framework": None, "runtime": "native",
                       "command": ["sleep", "30"], "exit_status": 1, "diagnosis": sentence,
                       "threads_estimate": {"total": 1}, "workload_status": 1,
                       "recorded_by": "supervisor", "pids_peak_kernel": 5,
                       "samples": len(rows)}


def test_a_row_cut_short_leaves_the_runs_status_and_sentence(tmp_path):
    said: list[str] = []
    w = Watcher.begin({"LAUNCHER_RUN_DIR": str(tmp_path / "run")}, ["w"], said.append,
                      WatchSettings())
    w.start(os.getpid(), [])
    with open(tmp_path / "run" / "telemetry.jsonl", "a") as f:
        f.write('{"t": 1.5, "thr')  # a full disk
    status, sentence, record = w.finish(3, "three", {"reason": "exit"}, {})
    assert (status, sentence) == (3, "three")
    assert record == {"error": record["error"]} and record["error"].startswith(
        "JSONDecodeError: ")
    assert said == [f"warning: the growth record could not be made ({record['error']})"]


def test_a_summary_that_cannot_be_written_is_said(tmp_path):
    said: list[str] = []
    w = Watcher.begin({"LAUNCHER_RUN_DIR": str(tmp_path / "run")}, ["w"], said.append,
                      WatchSettings())
    (tmp_path / "run" / "summary.json").mkdir()
    w.start(os.getpid(), [])
    status, sentence, record = w.finish(0, "ok", {"reason": "ok"}, {})
    assert (status, sentence) == (0, "ok") and "error" not in record
    assert len(said) == 1 and said[0].startswith(
        f"warning: no summary.json in {tmp_path / 'run'} (")


def test_a_workload_gone_before_the_start_is_measured_in_the_supervisors_own_cgroup(tmp_path):
    mine = memory_cgroup()
    if mine is None:
        pytest.skip("no cgroup v1 memory controller on this host")
    gone = subprocess.Popen(["true"])
    try:
        wait_until(lambda: zombie(gone.pid), what="the workload's end")
        assert not watcher._running(gone.pid) and watcher._running(os.getpid())
        w = Watcher.begin({"LAUNCHER_RUN_DIR": str(tmp_path / "run")}, ["true"],
                          lambda _: None, WatchSettings())
        w.start(gone.pid, [str(mine)])  # its cgroups no longer its own: ours
        row = rows_of(tmp_path / "run" / "telemetry.jsonl")[0]
        w.finish(0, "ok", {"reason": "ok"}, {})
        assert isinstance(row.get("memory_bytes"), int)  # the kernel's charge: ours
    finally:
        gone.wait()
    assert watcher._running(gone.pid) is False  # reaped: gone


def test_the_workloads_own_memory_cgroup_gives_its_limit_and_its_charge(tmp_path, root):
    mine = memory_cgroup()
    if mine is None:
        pytest.skip("no cgroup v1 memory controller on this host")
    cg = mine / f"lt-watcher-{uuid.uuid4().hex[:8]}"
    cg.mkdir()
    kid = subprocess.Popen(["sleep", "30"])
    try:
        (cg / "memory.limit_in_bytes").write_text(str(64 << 20))
        (cg / "cgroup.procs").write_text(str(kid.pid))
        for own in ([str(cg)], []):
            folder = tmp_path / f"run{len(own)}"
            w = Watcher.begin({"LAUNCHER_RUN_DIR": str(folder)}, ["sleep"], lambda _: None,
                              WatchSettings())
            fds = sorted(os.listdir("/proc/self/fd"))
            w.start(kid.pid, own)
            row = rows_of(folder / "telemetry.jsonl")[0]
            w.finish(0, "ok", {"reason": "ok"}, {})
            assert row["memory_limit_bytes"] == 64 << 20  # the workload's, not ours
            assert ("memory_bytes" in row) == bool(own)  # the charge: only of the run's own
            assert sorted(os.listdir("/proc/self/fd")) == fds  # its files closed at the end
    finally:
        kid.kill()
        kid.wait()
        wait_until(lambda: not cg.exists() or rmdir(cg), what="the test cgroup removed")


def test_the_stop_is_sigterm_to_the_workload_then_sigkill_to_its_tree_after_the_grace():
    script = textwrap.dedent("""
        import json, os, signal, subprocess, time
        from launcher.supervise.lifeline import become_subreaper
        from launcher.supervise.watcher import Watcher
        from launcher.telemetry.watch_settings import WatchSettings
        from tests.polling import wait_until

        def ended(p):
            with open(f"/proc/{p}/stat") as f:
                return f.read().rpartition(")")[2].split()[0] == "Z"

        become_subreaper()  # the grandchild stays in the tree when its parent goes
        said = []
        w = Watcher.begin({}, ["sh"], said.append, WatchSettings(interval=30.0))
        kid = subprocess.Popen(["sh", "-c", "trap 'exit 7' TERM; sleep 30 & echo $!; wait"],
                               stdout=subprocess.PIPE)
        grandchild = int(kid.stdout.readline())
        w.start(kid.pid, [])
        w._signal(signal.SIGTERM)  # the workload alone: it may write its checkpoint
        status = kid.wait(timeout=30)
        t = time.monotonic()
        w._kill_later(0.9)
        first = w.tick()  # the sooner of the next sample and the SIGKILL
        quick = time.monotonic() - t < 0.85  # (not on a host that stalled us that long)
        alive = not ended(grandchild)
        wait_until(lambda: w.tick() is not None and ended(grandchild), timeout=20,
                   what="the tree's SIGKILL")
        _, gstatus = os.waitpid(grandchild, 0)
        after = [w.kill_at, w.tick()]
        for k in range(1, 5):
            w.output("stdout", f"step {k}\\n".encode(), time.monotonic() - 10 + k)
        status2, sentence, record = w.finish(7, "seven", {"reason": "exit"}, {})
        print(json.dumps({"status": status, "first": first, "quick": quick, "alive": alive,
                          "gsignal": os.WTERMSIG(gstatus), "after": after, "said": said,
                          "end": [status2, sentence], "cycles": record.get("cycles_count"),
                          "error": record.get("error"), "closed": w.out.closed}))
    """)
    proc = subprocess.run([PY, "-c", script], capture_output=True, text=True, timeout=90,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["status"] == 7  # SIGTERM to the workload, which ended its own way
    assert got["alive"]  # its child was not signalled then
    if got["quick"]:
        assert 0 < got["first"] <= 0.9
    assert got["gsignal"] == 9  # the whole tree, after the grace
    assert got["after"] == [None, 30.0]  # once: no SIGKILL due any more
    assert got["end"] == [7, "seven"] and got["error"] is None and got["closed"]
    assert got["cycles"] == 4  # the rows read back from a file of its own (no folder)
    assert got["said"] == []


# the workload of a stop: 4 more open files an epoch (when told: its cycles are the test's)
# under RLIMIT_NOFILE 64
GROWING = """
import resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
held = []
for k in range(1, 100):
    if not sys.stdin.readline():
        break
    held += [open("/dev/null") for _ in range(4)]
    print(f"epoch {k}", flush=True)
"""


def test_a_stop_before_the_limit_is_sigterm_now_sigkill_later_and_exit_75(tmp_path):
    said: list[str] = []
    settings = WatchSettings(interval=30.0, growth={"stop": True, "stop_by": "growth.stop"})
    w = Watcher.begin({"LAUNCHER_RUN_DIR": str(tmp_path / "run")}, ["w"], said.append,
                      settings)
    kid = subprocess.Popen([PY, "-c", GROWING], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert kid.stdin is not None and kid.stdout is not None
    try:
        w.start(kid.pid, [])
        base = time.monotonic() - 100
        grace = None
        for k in range(1, 40):
            kid.stdin.write(b"go\n")
            kid.stdin.flush()
            w.output("stdout", kid.stdout.readline(), base + k)  # read a second apart
            if w.kill_at is not None:
                grace = w.kill_at - time.monotonic()
                break
        assert grace is not None and 5 < grace <= 10  # the SIGKILL: the loop's, later
        assert kid.wait(timeout=30) == -15  # the SIGTERM: now, to the workload
    finally:
        kid.kill()
        kid.wait()
    assert said[-1].startswith(f"growth: stopped before epoch {k} (growth.stop): open files")
    status, sentence, record = w.finish(143, "ended by SIGTERM", {"reason": "signal"}, {})
    assert status == 75 and sentence == record["diagnosis"]
    assert sentence.startswith(f"stopped before epoch {k} (growth.stop)")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (summary["exit_status"], summary["workload_status"]) == (75, 143)
    assert summary["diagnosis"] == sentence


def test_a_sampler_that_fails_ends_the_sampling_not_the_run(tmp_path):
    """A file size limit reached (as a full disk): the next row cannot be written."""
    script = textwrap.dedent("""
        import json, os, resource, signal, subprocess, sys
        from launcher.supervise.watcher import Watcher
        from launcher.telemetry.watch_settings import WatchSettings
        from tests.polling import wait_until

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG, not the signal's death
        said = []
        w = Watcher.begin({"LAUNCHER_RUN_DIR": sys.argv[1]}, ["w"], said.append,
                          WatchSettings(interval=0.1))
        kid = subprocess.Popen(["sleep", "30"])
        w.start(kid.pid, [])
        size = os.path.getsize(os.path.join(sys.argv[1], "telemetry.jsonl"))
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.getrlimit(
            resource.RLIMIT_FSIZE)[1]))
        waits = []
        wait_until(lambda: waits.append(w.tick()) or w.sampler is None, timeout=30,
                   what="the failed sample")
        print(json.dumps({"waits": waits[-1:] + [w.tick()], "said": said}))
        kid.kill()
    """)
    proc = subprocess.run([PY, "-c", script, str(tmp_path / "run")], capture_output=True,
                          text=True, timeout=90, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["waits"] == [1.0, 1.0]  # a tick a second from then on
    assert got["said"] == ["warning: the run is no longer sampled (OSError: [Errno 27] File "
                           "too large)"]


def test_the_last_output_skipped_over_the_reading_budget_is_read_at_the_end(tmp_path):
    w = Watcher.begin({"LAUNCHER_RUN_DIR": str(tmp_path / "run")}, ["w"], lambda _: None,
                      WatchSettings())
    w.start(os.getpid(), [])
    noise = (b"x" * 99 + b"\n") * 10000
    for _ in range(1000):  # until the reading's CPU budget is spent
        w.output("stderr", noise)
        if w.reading.record()["skipped_reads"]:
            break
    w.output("stderr", b"RuntimeError: can't start new thread\n")  # skipped too
    ended = {"reason": "exit", "diagnosis": EXITED, "limits_at_start": {"pids_max": 64}}
    status, sentence, record = w.finish(1, EXITED, ended, {})
    assert record["output"]["skipped_reads"] >= 2
    assert record["failure_text"] == {"thread": "RuntimeError: can't start new thread"}
    assert "pids.max 64" in sentence


def test_as_a_containers_pid_1_the_record_says_container_and_its_memory_is_the_runs(
        tmp_path, root):
    """PID 1 of a PID namespace of its own (with its own /proc), as a container's
    entrypoint is."""
    need("unshare (util-linux)", None if shutil.which("unshare") else "not on PATH")
    script = textwrap.dedent("""
        import json, os, subprocess, sys
        from launcher.supervise.watcher import Watcher, quick_record
        from launcher.telemetry.watch_settings import WatchSettings

        env = {"LAUNCHER_RUN_DIR": sys.argv[1]}
        quick_record(env, ["true"], WatchSettings(), 0, "done", 0.0, {})
        runtime = json.load(open(os.path.join(sys.argv[1], "summary.json")))["runtime"]
        kid = subprocess.Popen(["sleep", "30"])
        w = Watcher.begin(env, ["sleep"], lambda _: None, WatchSettings())
        w.start(kid.pid, [])
        row = json.loads(open(os.path.join(sys.argv[1], "telemetry.jsonl")).readline())
        w.finish(0, "ok", {"reason": "ok"}, {})
        kid.kill()
        kid.wait()
        print(json.dumps({"pid": os.getpid(), "runtime": runtime,
                          "charged": "memory_bytes" in row}))
    """)
    proc = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", PY, "-c", script,
                           str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=90,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == {"pid": 1, "runtime": "container",
                                                         "charged": True}


# --- a run over before the watch began, a pod's closing words -------------------------------


def test_a_quick_record_has_no_samples_and_says_who_ran_it(tmp_path):
    settings = WatchSettings(profile="p", runtime="docker", framework="torch")
    env = {"LAUNCHER_RUN_DIR": str(tmp_path / "run")}
    t = time.time()
    got = quick_record(env, ["true"], settings, 0, "done", t, {"x": 1})
    assert got == str(tmp_path / "run")
    assert (tmp_path / "run" / "telemetry.jsonl").read_text() == ""
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert t <= summary.pop("ended") <= time.time()
    assert summary == {"run_id": "run", "profile": "p", "framework": "torch",
                       "runtime": "docker", "command": ["true"], "exit_status": 0,
                       "diagnosis": "done", "started": t, "threads_estimate": None,
                       "growth": {}, "workload_status": 0, "recorded_by": "supervisor",
                       "x": 1, "samples": 0, "duration_s": 0.0, "peaks": {}, "gpus": []}
    assert quick_record({}, ["true"], settings, 0, "done", t, {}) is None
    (tmp_path / "file").write_text("")
    assert quick_record({"LAUNCHER_RUN_DIR": str(tmp_path / "file" / "run")}, ["true"],
                        settings, 0, "done", t, {}) is None


def test_the_frameworks_label_for_the_sampler():
    assert watcher._label(None) is None and watcher._label("") is None
    assert watcher._label("torch") == get("torch").label
    assert watcher._label("no-such-framework") is None


def test_a_pods_termination_message_is_the_sentence_cut_to_what_the_kubelet_keeps(
        tmp_path, monkeypatch):
    assert watcher.TERMINATION_LOG == "/dev/termination-log"  # where the kubelet reads it
    log = tmp_path / "termination-log"
    monkeypatch.setattr(watcher, "TERMINATION_LOG", str(log))
    watcher.termination_message("not a pod")
    assert not log.exists()  # not a Kubernetes container: nothing made
    log.write_text("old")
    watcher.termination_message("a" * 5000)
    assert log.read_text() == "a" * 4096
    watcher.termination_message("a" + "é" * 3000)  # cut inside a character: it is dropped
    assert log.read_text() == "a" + "é" * 2047
