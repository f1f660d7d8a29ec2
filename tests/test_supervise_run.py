"""launcher/supervise/run.py's stages, as a user sees them: the supervisor (`python -m
launcher.supervise`) around a small Python workload, its exit status, its lines on stderr and
its exit file; Voice, the lifeline's choice and the ticks driven directly."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from launcher import contract as c
from launcher.supervise.run import Run, Voice, both
from tests.conftest import ROOT, need
from tests.polling import wait_until
from tests.supervised import exit_record, said, supervise

PY = sys.executable


# --- how the workload ended ---------------------------------------------------------------


def test_a_failing_workload_its_status_sentence_and_exit_record(tmp_path):
    proc = supervise(tmp_path, "import sys; print('work'); sys.exit(3)")
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "work\n"
    rec = exit_record(tmp_path)
    assert rec["status"] == 3 and rec["workload_status"] == 3
    assert rec["started"] is True and rec["signal"] is None and rec["oom"] is False
    assert rec["record"] is None and rec["growth"] is None  # the watch was off
    assert said(proc.stderr) == [rec["diagnosis"]]  # the closing sentence, said once
    assert rec["limits_at_start"]["nproc"] is not None


def test_a_workload_killed_by_a_signal_that_ends_no_command(tmp_path):
    """SIGKILL is not one launcher ends by (contract.ENDS_BY): its status is 128 + 9, as a
    shell reports it, and the record names no signal to end by."""
    proc = supervise(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert proc.returncode == 128 + signal.SIGKILL, proc.stderr
    rec = exit_record(tmp_path)
    assert rec["status"] == rec["workload_status"] == 128 + signal.SIGKILL
    assert rec["signal"] is None
    assert said(proc.stderr) == [rec["diagnosis"]]


def test_a_workload_ended_by_sigint_ends_the_supervisor_by_it(tmp_path):
    proc = supervise(tmp_path, "import os, signal; signal.signal(signal.SIGINT, signal.SIG_DFL);"
                               " os.kill(os.getpid(), signal.SIGINT)")
    assert proc.returncode == -signal.SIGINT, proc.stderr
    rec = exit_record(tmp_path)
    assert rec["status"] == 128 + signal.SIGINT and rec["signal"] == signal.SIGINT


def test_quiet_says_nothing_of_a_success_and_the_sentence_of_a_failure(tmp_path):
    ok = supervise(tmp_path, "pass", **{c.QUIET: "1"})
    assert ok.returncode == 0 and said(ok.stderr) == [], ok.stderr
    assert exit_record(tmp_path)["status"] == 0
    failed = supervise(tmp_path, "raise SystemExit(4)", **{c.QUIET: "1"})
    assert failed.returncode == 4
    assert said(failed.stderr) == [exit_record(tmp_path)["diagnosis"]]
    loud = supervise(tmp_path, "pass")  # not quiet: a success is said too
    assert said(loud.stderr) == [exit_record(tmp_path)["diagnosis"]]


def test_a_command_that_cannot_run_is_not_started(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), c.RESOLVED: "1", c.WATCH: "0",
           c.EXIT_FILE: str(tmp_path / "exit.json")}
    proc = subprocess.run([PY, "-m", "launcher.supervise", "--", "no-such-command-here"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 127, proc.stderr
    rec = exit_record(tmp_path)
    assert rec == {"status": 127, "diagnosis": rec["diagnosis"], "started": False}
    assert "cannot run 'no-such-command-here'" in rec["diagnosis"]
    assert said(proc.stderr) == [rec["diagnosis"]]
    assert "Traceback" not in proc.stderr


def test_the_workload_gets_no_private_variables_and_the_record_folder_is_the_watchs(tmp_path):
    folder = tmp_path / "record"
    proc = supervise(tmp_path, f"import os; print(sorted(set(os.environ) & {set(c.PRIVATE)!r}))",
                     **{c.WATCH: "{}", c.RECORD_DIR: str(folder), c.QUIET: "1"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"  # the exit file, the record's folder: launcher's
    rec = exit_record(tmp_path)
    assert rec["record"] == str(folder)
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["exit_status"] == 0 and summary["workload_status"] == 0
    assert summary["command"][:2] == [PY, "-c"]
    # the kernel's own peaks travel to the summary: None outside a container's PID 1, where
    # the nearest cgroup's counters are the enclosing session's, not the run's
    assert summary["pids_peak_kernel"] is None and summary["memory_peak_kernel"] is None
    assert "kernel_peak" not in summary["peaks"]["pids_current"]
    assert "limits_at_start" not in summary


def test_launcher_gone_stops_the_workload_and_writes_no_exit_record(tmp_path):
    mark = tmp_path / "started"
    r, w = os.pipe()
    proc = supervise(tmp_path, f"import os, time; open({str(mark)!r}, 'w').write(str(os.getpid()));"
                               " time.sleep(60)",
                     pass_fds=(r,), wait=False, **{c.LIFELINE_FD: str(r)})
    os.close(r)
    try:
        wait_until(lambda: mark.exists() and mark.read_text(), timeout=30,
                   what="the workload to start")
        workload = int(mark.read_text())
        os.close(w)  # launcher's end of the lifeline: gone
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr.read()
    assert not (tmp_path / "exit.json").exists()  # nobody is left to read it
    assert not Path(f"/proc/{workload}").exists() or \
        "Z" in Path(f"/proc/{workload}/stat").read_text().split()[2]


def test_a_chunk_of_an_indexed_job_runs_once_and_is_committed(tmp_path):
    """A Kubernetes Indexed Job's pod: chunk 1 of 3 items by 2 runs, its output committed;
    a later pod for the same index runs nothing and says why."""
    root = tmp_path / "results"
    ran = tmp_path / "ran"
    code = (f"import os; open({str(ran)!r}, 'a').write(os.environ['LAUNCHER_CHUNK_START'] + "
            f"'-' + os.environ['LAUNCHER_CHUNK_END'] + '\\n')")
    chunk = {"JOB_COMPLETION_INDEX": "1", c.CHUNK_SIZE: "2", c.ITEMS: "3",
             c.CHUNK_OUT_ROOT: str(root)}
    first = supervise(tmp_path, code, HOSTNAME="pod-a", **chunk)
    assert first.returncode == 0, first.stderr
    assert ran.read_text() == "2-3\n"
    out = root / "00001" / "out"
    assert f"chunk 1: output committed to {out}" in said(first.stderr)
    again = supervise(tmp_path, code, HOSTNAME="pod-b", **chunk)
    assert again.returncode == 0, again.stderr
    assert ran.read_text() == "2-3\n"  # not run again
    words = (f"chunk 1: its output is committed already ({root / '00001'}/out, an earlier "
             f"pod's): nothing to run")
    assert said(again.stderr) == [words]
    # its exit file says so (status 0, nothing started), not the first pod's record
    assert exit_record(tmp_path) == {"status": 0, "diagnosis": words, "started": False}


# --- the voice ----------------------------------------------------------------------------


class _Pump:
    def __init__(self, takes: bool) -> None:
        self.takes, self.lines = takes, []  # type: ignore[var-annotated]

    def say(self, data: bytes) -> bool:
        self.lines.append(data)
        return self.takes


def test_the_voice_goes_out_at_once_through_a_block_buffered_stderr(monkeypatch):
    """A line is on the file when said (in order with the workload's own writes to fd 2),
    however the stream buffers (Python 3.8 block-buffers a redirected stderr)."""
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stderr", io.TextIOWrapper(raw, line_buffering=False))
    Voice()("one sentence")
    assert raw.getvalue() == b"launcher: one sentence\n"


def test_the_voice_through_the_pump_else_stderr_else_nowhere(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    say = Voice()
    say.pump = _Pump(takes=True)
    say("in order")
    assert say.pump.lines == [b"launcher: in order\n"] and err.getvalue() == ""
    say.pump = _Pump(takes=False)  # its reader is gone: our own stderr
    say("after")
    assert err.getvalue() == "launcher: after\n"
    monkeypatch.setattr(sys, "stderr", None)
    say("nowhere")  # no stderr: nothing, and no error
    closed = io.StringIO()
    closed.close()
    monkeypatch.setattr(sys, "stderr", closed)
    say("closed")  # a closed one: nothing either


# --- the lifeline's choice ----------------------------------------------------------------


def test_the_lifeline_is_the_fd_the_fifo_or_stdin(tmp_path, monkeypatch):
    assert Run(["x"], {c.LIFELINE_FD: "7"}).lifeline_fd() == 7
    assert Run(["x"], {c.LIFELINE_FD: "x", c.WATCH_STDIN: "1"}).lifeline_fd() == 0
    assert Run(["x"], {c.WATCH_STDIN: "0"}).lifeline_fd() is None
    assert Run(["x"], {}).lifeline_fd() is None
    fifo = tmp_path / "lifeline"
    os.mkfifo(fifo)
    held = os.open(fifo, os.O_RDWR)
    run = Run(["x"], {c.LIFELINE_PATH: str(fifo), c.WATCH_STDIN: "1"})
    try:
        fd = run.lifeline_fd()
        assert fd is not None and fd > 0 and os.path.samefile(f"/proc/self/fd/{fd}", fifo)
        assert run.lifeline_fd() == fd  # opened once
    finally:
        if run.lifeline is not None and run.lifeline >= 0:
            os.close(run.lifeline)
        os.close(held)


def test_a_lifeline_fifo_that_cannot_be_opened_is_said_once(tmp_path, monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    gone = tmp_path / "gone"
    run = Run(["x"], {c.LIFELINE_PATH: str(gone)})
    assert run.lifeline_fd() is None
    assert run.lifeline_fd() is None
    assert err.getvalue() == (f"launcher: warning: launcher's lifeline {gone}: No such file or "
                              f"directory; the run outlives launcher if it is killed\n")


def test_a_lifeline_fifo_opened_as_fd_0_is_the_lifeline(tmp_path):
    """A container started with stdin closed: the FIFO opens as fd 0, and is still held."""
    fifo = tmp_path / "lifeline"
    os.mkfifo(fifo)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child, with stdin closed
        try:
            held = os.open(fifo, os.O_RDWR)
            os.dup2(held, 9)
            os.close(held)
            os.close(0)
            got = Run(["x"], {c.LIFELINE_PATH: str(fifo)}).lifeline_fd()
            os.write(w, json.dumps(got).encode())
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    with os.fdopen(r) as f:
        assert json.loads(f.read()) == 0


# --- the ticks ----------------------------------------------------------------------------


def test_ticks_as_one_each_when_due():
    calls: list[str] = []

    def every(name: str, seconds: float):  # type: ignore[no-untyped-def]
        def tick() -> float:
            calls.append(name)
            return seconds
        return tick

    tick = both(every("slow", 60.0), None, every("fast", 0.0))
    first = tick()
    assert calls == ["slow", "fast"] and first == 0.0  # the sooner's: due again at once
    second = tick()
    assert calls == ["slow", "fast", "fast"]  # the slow one not due yet
    assert second == 0.0
    only = both(every("one", 30.0))
    assert 29.0 < only() <= 30.0


def test_a_run_cgroup_it_cannot_join_starts_nothing(tmp_path):
    gone = tmp_path / "gone"
    proc = supervise(tmp_path, "print('ran')", **{c.RUN_CGROUPS: c.encode_paths([str(gone)])})
    assert proc.returncode == 1 and proc.stdout == "", proc.stderr
    words = f"error: cannot join the run's cgroup {gone}: No such file or directory"
    assert said(proc.stderr) == [words]
    assert exit_record(tmp_path) == {"status": 1, "diagnosis": words, "started": False}


# --- the watch and the pump ---------------------------------------------------------------


def test_a_watched_run_passes_its_output_and_keeps_its_record(tmp_path):
    folder = tmp_path / "record"
    proc = supervise(tmp_path, "import sys, time\nfor i in range(3):\n"
                               "    print('epoch', i, flush=True); time.sleep(0.15)\n"
                               "print('bad', file=sys.stderr); sys.exit(2)",
                     **{c.WATCH: "{}", c.RECORD_DIR: str(folder)})
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "epoch 0\nepoch 1\nepoch 2\n"
    assert proc.stderr.startswith("bad\n")  # the workload's own words, then ours
    rec = exit_record(tmp_path)
    assert rec["status"] == rec["workload_status"] == 2 and rec["record"] == str(folder)
    assert isinstance(rec["growth"], dict) and rec["growth"]["output"]["read_bytes"] > 0
    assert said(proc.stderr)[-1] == rec["diagnosis"]
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["exit_status"] == summary["workload_status"] == 2
    assert summary["diagnosis"] == rec["diagnosis"]
    assert "pids_peak_kernel" in summary


def test_without_psutil_the_run_is_recorded_without_samples_and_says_so(tmp_path):
    """An image's python3 without psutil (here: no site-packages, `-S`)."""
    folder = tmp_path / "record"
    env = {**os.environ, "PYTHONPATH": str(ROOT), c.RESOLVED: "1", c.WATCH: "{}",
           c.EXIT_FILE: str(tmp_path / "exit.json"), c.RECORD_DIR: str(folder)}
    argv = [PY, "-S", "-m", "launcher.supervise", "--", PY, "-c", "raise SystemExit(2)"]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    note = ("note: growth is not watched and the run record has no samples here: this image "
            "lacks psutil (images `launcher build` makes have it; or `pip install psutil`)")
    assert said(proc.stderr) == [note, exit_record(tmp_path)["diagnosis"]]
    assert exit_record(tmp_path)["record"] == str(folder)
    quiet = subprocess.run(argv, env={**env, c.QUIET: "1"}, capture_output=True, text=True,
                           timeout=60)
    assert said(quiet.stderr) == [exit_record(tmp_path)["diagnosis"]]  # the failure alone


def test_stdin_as_the_lifeline_is_not_the_workloads(tmp_path):
    """A container launcher started without -i: its stdin is launcher's pipe, and the
    workload's is /dev/null; otherwise stdin is the workload's own."""
    code = ("import os, select; ready, _, _ = select.select([0], [], [], 20); "
            "print(repr(os.read(0, 100)) if ready else 'nothing')")
    env = {**os.environ, "PYTHONPATH": str(ROOT), c.RESOLVED: "1", c.WATCH: "0",
           c.EXIT_FILE: str(tmp_path / "exit.json")}
    argv = [PY, "-m", "launcher.supervise", "--", PY, "-c", code]
    proc = subprocess.Popen(argv, env={**env, c.WATCH_STDIN: "1"}, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write("launcher's\n")
        proc.stdin.flush()
        proc.wait(timeout=30)  # it ends while its lifeline is still held
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
    assert proc.returncode == 0, proc.stderr.read()
    assert proc.stdout.read() == "b''\n"  # /dev/null's end, at once
    own = subprocess.run(argv, env=env, input="its own\n", capture_output=True, text=True,
                         timeout=30)
    assert own.returncode == 0 and own.stdout == "b'its own\\n'\n", own.stderr


def test_a_signal_to_the_supervisor_reaches_the_workload(tmp_path):
    mark = tmp_path / "started"
    code = (f"import signal, sys, time\n"
            f"signal.signal(signal.SIGTERM, lambda *a: (print('term'), sys.exit(5)))\n"
            f"open({str(mark)!r}, 'w').close()\n"
            f"time.sleep(60)\n")
    proc = supervise(tmp_path, code, wait=False)
    try:
        wait_until(mark.exists, timeout=30, what="the workload's handler")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 5, err
    assert out == "term\n"
    assert exit_record(tmp_path)["status"] == 5


def test_nothing_the_workload_started_outlives_it(tmp_path):
    """An orphan of the workload (double-forked, deaf to SIGTERM) is the supervisor's to
    stop: its subreaper's, killed and reaped before the supervisor ends."""
    mark = tmp_path / "orphan"
    code = ("import os, signal, sys, time\n"
            "if os.fork() == 0:\n"
            "    if os.fork() == 0:\n"
            "        signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "        null = os.open(os.devnull, os.O_RDWR)\n"
            "        for fd in (0, 1, 2):\n"
            "            os.dup2(null, fd)  # the supervisor's pipes: not held\n"
            f"        open({str(mark)!r} + '.tmp', 'w').write(str(os.getpid()))\n"
            f"        os.rename({str(mark)!r} + '.tmp', {str(mark)!r})\n"
            "        time.sleep(60)\n"
            "    os._exit(0)\n"
            "os.wait()\n"
            f"while not os.path.exists({str(mark)!r}):\n"
            "    time.sleep(0.01)\n")
    proc = supervise(tmp_path, code)
    orphan = int(mark.read_text())
    try:
        assert proc.returncode == 0, proc.stderr
        stat = Path(f"/proc/{orphan}/stat")
        assert not stat.exists() or stat.read_text().split()[2] == "Z", "the orphan outlived it"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(orphan, signal.SIGKILL)


def test_what_the_workload_leaves_behind_gets_a_second_to_end_after_its_sigterm(tmp_path):
    """Two orphans: one that cleans up for 0.3 s on SIGTERM gets to finish; one deaf to it
    is killed a second after it, not later (the supervisor's exit waits on neither)."""
    deaf, tidy = tmp_path / "deaf", tmp_path / "tidy"
    code = ("import os, signal, sys, time\n"
            "def orphan(mark, on_term):\n"
            "    if os.fork() == 0:\n"
            "        if os.fork() == 0:\n"
            "            signal.signal(signal.SIGTERM, on_term)\n"
            "            null = os.open(os.devnull, os.O_RDWR)\n"
            "            for fd in (0, 1, 2):\n"
            "                os.dup2(null, fd)\n"
            "            open(mark + '.tmp', 'w').write(str(os.getpid()))\n"
            "            os.rename(mark + '.tmp', mark)\n"
            "            while True:\n"
            "                time.sleep(60)\n"
            "        os._exit(0)\n"
            "    os.wait()\n"
            "def tidy_up(*_):\n"
            "    time.sleep(0.3)\n"
            f"    open({str(tidy)!r} + '.done', 'w').write(str(time.time()))\n"
            "    os._exit(0)\n"
            f"orphan({str(deaf)!r}, signal.SIG_IGN)\n"
            f"orphan({str(tidy)!r}, tidy_up)\n"
            f"while not (os.path.exists({str(deaf)!r}) and os.path.exists({str(tidy)!r})):\n"
            "    time.sleep(0.01)\n")
    proc = supervise(tmp_path, code, wait=False)
    try:
        wait_until(lambda: deaf.exists() and tidy.exists(), timeout=30, what="both orphans")
        exited = time.time()  # the workload's: right after both marks
        proc.communicate(timeout=60)
        took = time.time() - exited
        assert proc.returncode == 0
        assert (tmp_path / "tidy.done").exists(), "the tidy orphan was killed before its end"
        stat = Path(f"/proc/{int(deaf.read_text())}/stat")
        assert not stat.exists() or stat.read_text().split()[2] == "Z", "the deaf one outlived it"
        assert 0.9 < took < 1.7, took  # a second's grace (a busy host's slack), not two
    finally:
        for mark in (deaf, tidy):
            with contextlib.suppress(ProcessLookupError, FileNotFoundError, ValueError):
                os.kill(int(mark.read_text()), signal.SIGKILL)


def test_a_file_the_workload_writes_is_read_as_it_grows_not_at_its_end(tmp_path):
    """stdout redirected to a file is the workload's own; the watch reads it back while the
    run goes on: its epochs' boundaries lie where they were printed, not all at the end."""
    folder, out = tmp_path / "record", tmp_path / "out.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT), c.RESOLVED: "1", c.WATCH: "{}",
           c.EXIT_FILE: str(tmp_path / "exit.json"), c.RECORD_DIR: str(folder)}
    code = ("import time\nfor i in range(4):\n"
            "    print('epoch', i, flush=True); time.sleep(0.6)\n")
    with out.open("w") as f:
        proc = subprocess.run([PY, "-m", "launcher.supervise", "--", PY, "-c", code], env=env,
                              stdout=f, stderr=subprocess.PIPE, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().startswith("epoch 0\nepoch 1\nepoch 2\nepoch 3\n")
    cycles = exit_record(tmp_path)["growth"]["cycles"]
    assert [x["n"] for x in cycles] == [0, 1, 2, 3]
    ends = [x["t1"] for x in cycles[:3]]  # each printed 0.6 s after the one before
    assert ends[2] - ends[0] > 0.8, cycles


def test_the_supervisor_stays_in_the_entrypoints_own_memory_cgroup(tmp_path):
    """Only a native run's own cgroups (launcher's) are left while the workload runs; the
    cgroups an image's entrypoint made for its workload are its own too."""
    mine = next((line.split(":", 2)[2] for line in Path("/proc/self/cgroup").read_text()
                 .splitlines() if line.split(":")[1:2] == ["memory"]), None)
    parent = Path(f"/sys/fs/cgroup/memory{mine}") if mine else None
    need("root and a writable cgroup v1 memory hierarchy (this kind of host)",
         None if os.geteuid() == 0 and parent and os.access(parent, os.W_OK) else "not here")
    assert parent is not None and mine is not None
    box = parent / f"launcher-entry-{os.getpid()}"
    box.mkdir()
    try:
        show = tmp_path / "show.py"  # the supervisor's (its parent's) memory cgroup
        show.write_text("import os\nprint([x.split(':', 2)[2] for x in open("
                        "f'/proc/{os.getppid()}/cgroup') if x.split(':')[1] == 'memory'][0])\n")
        code = (
            "import os, sys\n"
            "from launcher.supervise import run\n"
            "from launcher.supervise.start import Prepared\n"
            f"run.prepare = lambda environ, say: Prepared(dict(os.environ), [{str(box)!r}])\n"
            f"r = run.Run([sys.executable, {str(show)!r}], {{'LAUNCHER_WATCH': '0'}})\n"
            "sys.exit(r())\n")
        proc = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == f"{mine.rstrip('/')}/{box.name}", proc.stdout
    finally:
        for _ in range(100):
            try:
                box.rmdir()
                break
            except OSError:
                time.sleep(0.05)


# the workload waits for a SIGWINCH after which its stdout (our pseudo-terminal) has the
# size its stdin (the real terminal, or its own console) has
RESIZED = ("import os, signal, time\n"
           "seen = []\n"
           "def winch(*_):\n"
           "    seen.append(os.get_terminal_size(1))\n"
           "    if seen[-1] != os.get_terminal_size(0):\n"
           "        seen.pop()  # told before our terminal had the size: wait for the next\n"
           "signal.signal(signal.SIGWINCH, winch)\n"
           "print('ready', *os.get_terminal_size(1), flush=True)\n"
           "end = time.monotonic() + 20\n"
           "while time.monotonic() < end and not seen:\n"
           "    time.sleep(0.02)\n"
           "print('size', *(seen[-1] if seen else ()), flush=True)\n"
           "calls = 0\n"
           "def count(*_):\n"
           "    global calls\n"
           "    calls += 1\n"
           "signal.signal(signal.SIGWINCH, count)\n"
           "time.sleep(0.5)  # the size unchanged: told nothing more\n"
           "print('more', calls, flush=True)\n")


def _resized_on_a_terminal(tmp_path: Path, *prefix: str) -> bytes:
    """What RESIZED printed, run by the supervisor (after `prefix`) on a terminal of the
    test's, 90x30 at the start, made 100x40 once it is ready."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child: on its terminal, as a shell starts it
        env = {**os.environ, "PYTHONPATH": str(ROOT), c.RESOLVED: "1", c.QUIET: "1",
               c.RECORD_DIR: str(tmp_path / "record")}
        argv = [*prefix, PY, "-m", "launcher.supervise", "--", PY, "-c", RESIZED]
        os.execvpe(argv[0], argv, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 90, 0, 0))
    out, resized, end = b"", False, time.monotonic() + 60
    try:
        while b"\n" not in out.partition(b"more")[2] and time.monotonic() < end:
            if select.select([fd], [], [], 0.1)[0]:
                try:
                    data = os.read(fd, 4096)
                except OSError:  # EIO: the terminal's last holder is gone
                    break
                if not data:
                    break
                out += data
            if b"ready" in out and not resized:
                fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
                resized = True
    finally:
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == 0:
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    return out


def test_a_containers_terminal_resized_resizes_the_workloads(tmp_path):
    """PID 1 with a terminal (`docker run -t`): the workload's own pseudo-terminal takes the
    container's terminal's new size when it changes (SIGWINCH comes to the supervisor)."""
    import shutil

    need("root and unshare (the supervisor as PID 1 of a PID namespace)",
         None if os.geteuid() == 0 and shutil.which("unshare") else "not here")
    out = _resized_on_a_terminal(tmp_path, "unshare", "--pid", "--fork", "--kill-child")
    assert b"ready 90 30" in out, out  # its terminal the container's size from the start
    assert b"size 100 40" in out, out


def test_a_terminal_resized_natively_resizes_the_workloads_output_terminal(tmp_path):
    """Natively the workload's group holds the terminal: the resize's SIGWINCH is its own,
    not the supervisor's. The pseudo-terminal its output goes through follows the real one's
    size all the same, and the workload is told again once it has (a progress bar that
    reads stdout's width at SIGWINCH gets the new one)."""
    out = _resized_on_a_terminal(tmp_path)
    assert b"ready 90 30" in out, out
    assert b"size 100 40" in out, out
    assert b"more 0" in out, out  # told once more, not at every look


def _may_be_spared() -> bool:
    """Whether this host lets a process take -1000 (a child of ours tries)."""
    import subprocess

    try_it = "with open('/proc/self/oom_score_adj', 'w') as f: f.write('-1000')"
    return subprocess.run([PY, "-c", try_it], capture_output=True, timeout=30).returncode == 0


def test_the_supervisor_spared_from_the_oom_killer_stays_in_the_runs_memory_cgroup(tmp_path):
    """A native run's v1 memory cgroup: the supervisor, once the workload has started with
    its own OOM score, takes -1000 and stays in the run's cgroup (its counters are read
    there); one that may not be spared leaves it while the workload runs (a memory limit's
    kill then takes the workload, never the supervisor that records it)."""

    mine = next((line.split(":", 2)[2] for line in Path("/proc/self/cgroup").read_text()
                 .splitlines() if line.split(":")[1:2] == ["memory"]), None)
    parent = Path(f"/sys/fs/cgroup/memory{mine}") if mine else None
    need("root and a writable cgroup v1 memory hierarchy (this kind of host)",
         None if os.geteuid() == 0 and parent and os.access(parent, os.W_OK) else "not here")
    assert parent is not None
    run = parent / f"launcher-spawn-{os.getpid()}"
    run.mkdir()
    try:
        # read once the supervisor relays signals (catches SIGTERM): its start is over
        code = ("import os, signal, time\n"
                "sup = f'/proc/{os.getppid()}'\n"
                "def caught():\n"
                "    line = [x for x in open(sup + '/status') if x.startswith('SigCgt:')][0]\n"
                "    return int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1\n"
                "end = time.monotonic() + 30\n"
                "while not caught() and time.monotonic() < end:\n"
                "    time.sleep(0.01)\n"
                "print(open('/proc/self/oom_score_adj').read().strip(), "
                "open(sup + '/oom_score_adj').read().strip(), "
                "[x.split(':', 2)[2] for x in open(sup + '/cgroup').read().splitlines() "
                "if x.split(':')[1] == 'memory'][0])\n")
        proc = supervise(tmp_path, code, **{c.RUN_CGROUPS: str(run)})
        assert proc.returncode == 0, proc.stderr
        workload, supervisor, where = proc.stdout.split()
        ours = Path("/proc/self/oom_score_adj").read_text().strip()
        assert workload == ours  # the score it was started with
        if _may_be_spared():
            assert supervisor == "-1000"
            assert where == f"{mine.rstrip('/')}/{run.name}"
        else:  # (a sandbox that refuses the score even to root): out of the run's cgroup
            assert supervisor == ours
            assert where == mine
        # and back in it for the record: the memory peak is the run's cgroup's
        peak = int((run / "memory.max_usage_in_bytes").read_text())
        assert json.loads((tmp_path / "exit.json").read_text())["memory_peak"] == peak
    finally:
        for _ in range(100):  # the supervisor has gone: its cgroup is empty
            try:
                run.rmdir()
                break
            except OSError:
                time.sleep(0.05)
