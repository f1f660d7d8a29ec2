"""The supervisor's units, driven directly with real processes, pipes and pseudo-terminals:
spawn.py (the process group, the shell's words), loop.py (relaying, reaping, a stop, launcher
gone), terminal.py (the foreground), lifeline.py (launcher's words, its end, a FIFO),
pump.py (flags of shared pipes, one stream, files read back, lines of its own), start.py and
telemetry/watch_settings.py (the environment in and out). The whole run, with and without
launcher, is tests/test_transparent.py's."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import signal
import sys
import time
from pathlib import Path

import pytest

from launcher import contract as c
from launcher.supervise import lifeline as lifeline_mod
from launcher.supervise.loop import RELAYED, TO_GROUP, Loop, relay
from launcher.supervise.pump import Pump
from launcher.supervise.spawn import DEFAULTS, NotRunnable, spawn
from launcher.supervise.start import Prepared, prepare, resolved_env
from launcher.supervise.terminal import Foreground
from launcher.telemetry.watch_settings import WatchSettings, is_off
from tests.conftest import need
from tests.polling import wait_until
from tests.supervised import read_all, wait_status

PY = sys.executable


def _spawn(code: str, **kw) -> int:  # type: ignore[no-untyped-def]
    return spawn([PY, "-c", code], dict(os.environ), [], set(), lambda _: None, **kw)


# --- spawn ------------------------------------------------------------------------------


def test_the_workload_leads_a_process_group_of_its_own_with_default_signals():
    r, w = os.pipe()
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a background job inherits it
    try:
        pid = spawn([PY, "-c", "import os, signal; print(os.getpgrp(), os.getpid(), "
                     "signal.getsignal(signal.SIGINT) is signal.default_int_handler, "
                     "signal.getsignal(signal.SIGTTOU))"], dict(os.environ),
                    [(os.POSIX_SPAWN_DUP2, w, 1)], set(), lambda _: None)
    finally:
        signal.signal(signal.SIGINT, old)
    os.close(w)
    assert wait_status(pid) == 0
    out = read_all(r).decode().split()
    assert out[0] == out[1] == str(pid)  # its own group, its pid the group's id
    assert out[2] == "True"  # SIGINT back at its default (Python's KeyboardInterrupt)
    assert out[3] == str(int(signal.SIG_DFL))
    assert signal.SIGTTOU in DEFAULTS and signal.SIGPIPE in DEFAULTS


def test_what_the_shell_says_of_a_command_it_cannot_run(tmp_path):
    (tmp_path / "plain").write_text("echo hi\n")
    (tmp_path / "noint").write_text("#!/no/such/interpreter\necho hi\n")
    (tmp_path / "noint").chmod(0o755)
    cases = {str(tmp_path / "plain"): (126, "Permission denied"),
             str(tmp_path / "noint"): (127, "/no/such/interpreter: bad interpreter"),
             "no-such-command-here": (127, "cannot run 'no-such-command-here'"),
             str(tmp_path / "absent"): (127, "No such file or directory")}
    for cmd, (status, words) in cases.items():
        with pytest.raises(NotRunnable) as got:
            spawn([cmd], dict(os.environ), [], set(), lambda _: None)
        assert got.value.status == status and words in got.value.words, (cmd, got.value.words)


# --- loop -------------------------------------------------------------------------------


class _Foreground:
    def __init__(self) -> None:
        self.stops: list[int] = []
        self.conts = 0

    def stopped(self, sig: int) -> None:
        self.stops.append(sig)
        os.kill(self.pid, signal.SIGCONT)

    def continued(self) -> None:
        self.conts += 1

    pid = 0


def test_the_loop_reaps_its_workload_and_every_other_child():
    other = _spawn("pass")
    pid = _spawn("import time; time.sleep(0.3); raise SystemExit(7)")
    loop = Loop(pid, [], tick=lambda: 0.05)
    status = loop.run()
    assert status is not None and os.WEXITSTATUS(status) == 7
    with pytest.raises(ChildProcessError):
        os.waitpid(other, os.WNOHANG)  # reaped meanwhile: no zombie left


def test_the_loop_hands_a_stop_to_the_foreground_and_goes_on():
    pid = _spawn("import os, signal, time; os.kill(os.getpid(), signal.SIGTSTP); "
                 "time.sleep(0.2)")
    fg = _Foreground()
    fg.pid = pid
    status = Loop(pid, [], tick=lambda: 0.05, foreground=fg).run()
    assert fg.stops == [signal.SIGTSTP]
    assert status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_signals_relayed_to_the_group_or_the_first_process(tmp_path):
    """SIGINT reaches every process of the workload's group (a terminal's way); SIGTERM its
    first process alone (`kill PID`'s)."""
    mark = tmp_path / "child-got"
    code = ("import os, signal, sys, time\n"
            "if os.fork() == 0:\n"
            f"    signal.signal(signal.SIGINT, lambda *a: (open({str(mark)!r}, 'w').write('int'),"
            " os._exit(0)))\n"
            f"    signal.signal(signal.SIGTERM, lambda *a: (open({str(mark)!r}, 'w').write('term'),"
            " os._exit(0)))\n"
            "    time.sleep(30); os._exit(1)\n"
            "signal.signal(signal.SIGTERM, lambda *a: sys.exit(3))\n"
            "signal.signal(signal.SIGINT, lambda *a: sys.exit(2))\n"
            "time.sleep(30)\n")
    for sig, child_words, status in ((signal.SIGINT, "int", 2), (signal.SIGTERM, None, 3)):
        mark.unlink(missing_ok=True)
        pid = _spawn(code)
        time.sleep(0.5)  # both have their handlers
        relay(pid, sig)
        assert os.WEXITSTATUS(wait_status(pid)) == status
        if child_words:
            wait_until(mark.exists, timeout=10, what="the child to get it")
            assert mark.read_text() == child_words
        else:
            time.sleep(0.3)
            assert not mark.exists()  # the first process alone
            os.killpg(pid, signal.SIGKILL)
    assert signal.SIGINT in TO_GROUP and signal.SIGTERM in RELAYED
    assert signal.SIGTERM not in TO_GROUP


def test_the_loop_relays_what_it_heard_and_stops_when_launcher_is_gone():
    pid = _spawn("import signal, time; signal.signal(signal.SIGUSR1, lambda *a: print('u'));"
                 " time.sleep(30)")
    r, w = os.pipe()
    loop = Loop(pid, [], tick=lambda: 0.05)
    line = lifeline_mod.Lifeline(r, lambda: setattr(loop, "gone", True), lambda _: None)
    loop.dispatchers.append(line)
    loop.signal(signal.SIGUSR1)
    os.close(w)  # launcher's end: gone
    assert loop.run() is None and loop.gone
    with pytest.raises(ChildProcessError):  # the tree was stopped and reaped
        os.waitpid(pid, os.WNOHANG)


# --- lifeline ---------------------------------------------------------------------------


def test_launchers_words_on_the_lifeline_and_a_fifo_s_end(tmp_path):
    heard: list[str] = []
    r, w = os.pipe()
    line = lifeline_mod.Lifeline(r, lambda: heard.append("gone"), heard.append)
    os.write(w, b"closed std")
    line.ready([r], [])
    os.write(w, b"out\nnonsense\n")
    line.ready([r], [])
    assert heard == ["stdout"]  # a word split over two reads, and nothing else
    # a FIFO launcher held before we opened it never polls as hung up: read at each turn
    fifo = tmp_path / "lifeline"
    os.mkfifo(fifo)
    held = os.open(fifo, os.O_RDWR)
    ours = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    gone: list[bool] = []
    named = lifeline_mod.Lifeline(ours, lambda: gone.append(True), heard.append)
    assert named.fifo
    named.ready([], [])
    assert gone == []
    os.close(held)
    named.ready([], [])  # not in the readable list: read all the same
    assert gone == [True]
    os.close(ours)


# --- terminal ---------------------------------------------------------------------------


def test_the_foreground_goes_to_the_workload_and_back():
    """In a session of our own with a pseudo-terminal as its controlling one, as a shell's
    job: the workload's group gets the foreground, and the job's comes back at the end."""
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child: a session leader with the terminal
        try:
            fg = Foreground()
            assert fg.tty is not None
            child = os.fork()
            if child == 0:
                os.setpgid(0, 0)
                time.sleep(0.5)
                os._exit(0)
            os.setpgid(child, child)
            fg.give(child)
            held = os.tcgetpgrp(fg.tty) == child
            os.waitpid(child, 0)
            fg.close()
            back = os.tcgetpgrp(0) == os.getpgrp()
            os.write(1, f"held={held} back={back}\n".encode())
        finally:
            os._exit(0)
    out = b""
    while True:
        try:
            data = os.read(fd, 1024)
        except OSError:
            break
        if not data:
            break
        out += data
    os.waitpid(pid, 0)
    assert b"held=True back=True" in out, out


def test_no_terminal_no_foreground():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child, in a session without a terminal
        os.setsid()
        fg = Foreground()
        os.write(w, json.dumps({"tty": fg.tty}).encode())
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    assert json.loads(os.read(r, 100)) == {"tty": None}


# --- pump -------------------------------------------------------------------------------


def _child_with(fds: dict[int, int], code: str) -> int:
    return spawn([PY, "-c", code], dict(os.environ),
                 [(os.POSIX_SPAWN_DUP2, src, dst) for dst, src in fds.items()], set(),
                 lambda _: None)


def test_the_pump_never_changes_a_shared_pipes_flags_and_says_on_a_line_of_its_own():
    r, w = os.pipe()
    flags = fcntl.fcntl(w, fcntl.F_GETFL)
    saved = os.dup(1), os.dup(2)
    os.dup2(w, 1)
    os.dup2(w, 2)  # one file: one stream
    seen: list[tuple[str, bytes]] = []
    try:
        pump = Pump(lambda name, data: seen.append((name, data)))
        assert fcntl.fcntl(1, fcntl.F_GETFL) == flags  # the shared description untouched
        pid = _child_with(pump.child, "import sys; sys.stdout.write('no newline'); "
                          "sys.stdout.flush(); sys.stderr.write('!')")
        pump.spawned()
        while pump.readable():
            pump.ready(pump.readable(), [])
        pump.say(b"launcher: done\n")
        pump.drain()
        pump.close()
        wait_status(pid)
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
    os.close(w)
    out = read_all(r)
    assert out == b"no newline!\nlauncher: done\n", out
    assert {name for name, _ in seen} == {"stdout"}  # stdout and stderr as one stream
    assert fcntl.fcntl(saved[0], fcntl.F_GETFL) & os.O_NONBLOCK == 0


def test_one_stream_where_launcher_said_so_and_a_file_read_back(tmp_path):
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    log = open(tmp_path / "log", "wb")  # noqa: SIM115
    saved = os.dup(1), os.dup(2)
    seen: list[tuple[str, bytes]] = []
    try:
        os.dup2(w1, 1)
        os.dup2(w2, 2)
        pump = Pump(lambda name, data: seen.append((name, data)), one_stream=True)
        assert pump.child[1] == pump.child[2]  # the container's two pipes: one stream
        pump.close()
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        pump = Pump(lambda name, data: seen.append((name, data)))
        assert pump.child == {} and len(pump.tails) == 1  # a file: its own, read back once
        os.write(1, b"epoch 1\n")
        pump.tail()
        pump.close()
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        log.close()
    assert ("stdout", b"epoch 1\n") in seen


# --- start and the watch's settings ------------------------------------------------------


def test_launchers_resolved_environment_less_its_own_variables():
    env = {c.RESOLVED: "1", c.REMOVE: "STALE", "STALE": "x", c.LIFELINE_FD: "5",
           c.WATCH: "{}", "KEEP": "y"}
    assert resolved_env(env) == {"KEEP": "y"}
    p = prepare(env, lambda _: None)
    assert isinstance(p, Prepared) and p.env == {"KEEP": "y"} and p.cgroups == []


def test_the_watch_settings_round_trip_and_one_off_rule():
    s = WatchSettings(growth={"cycle": r"epoch (\d+)", "stop": True}, interval=0.5,
                      framework="torch", runtime="native")
    back = WatchSettings.from_env(s.to_env())
    assert back is not None
    assert (back.growth, back.interval, back.framework, back.runtime) == (
        s.growth, 0.5, "torch", "native")
    assert back.options.pattern.pattern == r"epoch (\d+)" and back.options.stop
    assert back.options is back.options  # compiled once
    for off in ("0", "off", "No", " false "):
        assert is_off({c.WATCH: off}) and WatchSettings.from_env({c.WATCH: off}) is None
    assert not is_off({}) and WatchSettings.from_env({}) is not None


def test_an_exit_record_carries_the_signal_to_end_by(tmp_path):
    from launcher.contract import ENDS_BY

    exit_file = tmp_path / "exit.json"
    env = {**os.environ, c.RESOLVED: "1", c.EXIT_FILE: str(exit_file), c.WATCH: "0",
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    import subprocess

    proc = subprocess.run([PY, "-m", "launcher.supervise", "--", PY, "-c",
                           "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"],
                          env=env, capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGTERM  # the supervisor ended by it too
    assert json.loads(exit_file.read_text())["signal"] == signal.SIGTERM in ENDS_BY


PIDS_V1 = Path("/sys/fs/cgroup/pids")


def test_the_workload_starts_in_the_entrypoints_own_cgroup(tmp_path):
    """An image's entrypoint that made cgroups of its own for the workload (start.Prepared's
    `cgroups`) joins them before the workload starts, which then runs there (the cgroup v2
    lab's entrypoint-container-ns extra found a supervisor that did not)."""
    need("root and a writable cgroup v1 pids hierarchy (this kind of host)",
         None if os.geteuid() == 0 and os.access(PIDS_V1, os.W_OK) else "not here")
    box = PIDS_V1 / f"launcher-units-{os.getpid()}"
    box.mkdir()
    try:
        code = (
            "import os, sys\n"
            "from launcher.supervise import run\n"
            "from launcher.supervise.start import Prepared\n"
            f"run.prepare = lambda environ, say: Prepared(dict(os.environ), [{str(box)!r}])\n"
            "r = run.Run(['cat', '/proc/self/cgroup'], {'LAUNCHER_WATCH': '0'})\n"
            "sys.exit(r())\n")
        proc = __import__("subprocess").run(
            [PY, "-c", code], capture_output=True, text=True, timeout=60,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
        assert proc.returncode == 0, proc.stderr
        assert f"pids:/{box.name}" in proc.stdout, proc.stdout
    finally:
        for _ in range(50):
            try:
                box.rmdir()
                break
            except OSError:
                time.sleep(0.1)
