"""launcher/supervise/loop.py, driven directly with real processes, pipes and signals: the
supervisor's one loop (its dispatchers' fds in one select(), the ticks' timeouts, the wake fd
that a signal writes to), the signals it heard relayed in order (to the workload's group or
its first process), a stop handed to the terminal's foreground, and every exited child
reaped. tests/test_supervise_units.py has the loop's first cases; this file pins each step."""

from __future__ import annotations

import contextlib
import inspect
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from launcher.supervise.loop import RELAYED, TO_GROUP, Loop, relay
from launcher.supervise.spawn import DUP2, spawn
from tests.conftest import ROOT
from tests.polling import wait_until

PY = sys.executable


class Hung(Exception):
    """The loop went on past its deadline: it waits for something that never comes."""


@contextlib.contextmanager
def deadline(seconds: float = 30.0) -> Iterator[None]:
    """The block ends within `seconds` of wall time, or fails (SIGALRM interrupts a select()
    that would wait for ever, and a loop that never ends)."""
    def expired(_sig: int, _frame: object) -> None:
        raise Hung(f"past {seconds:g}s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def handlers(sigs: tuple[int, ...], handler: Callable[[int, Any], None]) -> Iterator[None]:
    """`handler` for `sigs` (the supervisor's run sets the loop's), as they were after."""
    old = {sig: signal.signal(sig, handler) for sig in sigs}
    try:
        yield
    finally:
        for sig, was in old.items():
            signal.signal(sig, was)


class Workload:
    """`python -c code` in a process group of its own (spawn.py's), its stdin and stdout on
    pipes of ours."""

    def __init__(self, code: str) -> None:
        in_r, self.stdin = os.pipe()
        self.stdout, out_w = os.pipe()
        self.pid = spawn([PY, "-c", code], dict(os.environ), [(DUP2, in_r, 0), (DUP2, out_w, 1)],
                         set(), lambda _: None)
        os.close(in_r)
        os.close(out_w)
        os.set_blocking(self.stdout, False)
        self.out = b""

    def said(self) -> bytes:
        """What it wrote so far."""
        with contextlib.suppress(BlockingIOError):
            while data := os.read(self.stdout, 4096):
                self.out += data
        return self.out

    def wait_for(self, text: bytes) -> None:
        wait_until(lambda: text in self.said(), timeout=30, what=f"{text!r} from the workload")

    def close_stdin(self) -> None:
        if self.stdin >= 0:
            os.close(self.stdin)
            self.stdin = -1

    def end(self) -> None:
        """Its group killed and its fds closed, whatever became of it."""
        self.close_stdin()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        with contextlib.suppress(OSError):
            os.close(self.stdout)


@pytest.fixture
def workloads() -> Iterator[Callable[[str], Workload]]:
    """Workloads started by the test, each ended after it."""
    made: list[Workload] = []

    def start(code: str) -> Workload:
        made.append(Workload(code))
        return made[-1]

    yield start
    for w in made:
        w.end()


# a workload that says it is ready, then waits for its stdin's end
WAITS = "import sys; sys.stdout.write('ready'); sys.stdout.flush(); sys.stdin.read()\n"


class Reader:
    """A dispatcher: the workload's stdout, read while it is listed; `on_data` is told what
    came. Each turn it notes the other fds select() found readable (the wake fd's)."""

    def __init__(self, fd: int, on_data: Callable[[bytes], None]) -> None:
        self.fd, self.on_data = fd, on_data
        self.listed = True
        self.others: list[list[int]] = []  # per turn: the readable fds not ours
        self.writes: list[list[int]] = []  # per turn: the writable fds it was told of

    def readable(self) -> list[int]:
        return [self.fd] if self.listed else []

    def writable(self) -> list[int]:
        return []

    def ready(self, readable: list[int], writable: list[int]) -> None:
        self.others.append([fd for fd in readable if fd != self.fd])
        self.writes.append(list(writable))
        if self.fd in readable:
            self.on_data(os.read(self.fd, 4096))


class Feeder:
    """A dispatcher: once `on`, a line written to the workload's stdin when select() finds it
    writable, then its stdin closed."""

    def __init__(self, fd: int, line: bytes) -> None:
        self.fd, self.line = fd, line
        self.on = False
        self.told: list[tuple[list[int], list[int]]] = []

    def readable(self) -> list[int]:
        return []

    def writable(self) -> list[int]:
        return [self.fd] if self.fd >= 0 and self.on else []

    def ready(self, readable: list[int], writable: list[int]) -> None:
        self.told.append((list(readable), list(writable)))
        if self.fd >= 0 and self.fd in writable:
            os.write(self.fd, self.line)
            os.close(self.fd)
            self.fd = -1


def zombie_or_stopped(pid: int, state: str) -> bool:
    """The process's state letter (/proc/PID/stat) is `state` (Z: exited, not reaped)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        return f.read().rpartition(b")")[2].split()[0].decode() == state


def reaped(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


# --- the turns: ticks, dispatchers, the wake fd ----------------------------------------------


def test_the_loop_ticks_while_the_workload_runs_and_returns_its_status(workloads):
    w = workloads("import sys; sys.stdin.read(); raise SystemExit(3)")
    ticks: list[float] = []

    def tick() -> float:
        ticks.append(0.01)
        if len(ticks) == 3:
            w.close_stdin()  # the workload ends at its stdin's end
        return 0.01

    with deadline():
        status = Loop(w.pid, [], tick=tick).run()
    assert status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 3
    assert len(ticks) >= 3


def test_a_dispatcher_is_told_which_of_its_fds_are_readable_and_which_writable(workloads):
    w = workloads("import sys; sys.stdout.write('x'); sys.stdout.flush();"
                  " raise SystemExit(len(sys.stdin.readline()))")
    got: list[bytes] = []

    def on_data(data: bytes) -> None:
        got.append(data)
        feeder.on = True  # it wrote: now its line

    reader = Reader(w.stdout, on_data)
    feeder = Feeder(w.stdin, b"go!\n")
    w.stdin = -1  # the feeder's to close
    with deadline():
        status = Loop(w.pid, [reader, feeder], tick=lambda: 0.05).run()
    assert status is not None and os.WEXITSTATUS(status) == 4  # it read "go!\n"
    assert got[:1] == [b"x"]  # told its fd was readable
    assert feeder.fd == -1  # told its fd was writable, once: then it wrote and closed it
    assert all(reader.fd not in writable for writable in reader.writes)


def test_without_ticks_the_workloads_end_wakes_the_loop_through_the_wake_fd(workloads):
    """No timeout at all: select() waits for the dispatchers' fds and the wake fd alone, and
    SIGCHLD (the supervisor's run sets the loop's handler for it) writes to the wake fd."""
    w = workloads(WAITS)

    def on_data(data: bytes) -> None:
        reader.listed = False  # its end is not waited for: SIGCHLD must wake the loop
        w.close_stdin()

    reader = Reader(w.stdout, on_data)
    loop = Loop(w.pid, [reader])
    with deadline(), handlers((signal.SIGCHLD,), loop.signal):
        status = loop.run()
    assert status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert reader.others[-1] != []  # the last turn's wake was the wake fd's


def test_a_signal_wakes_the_loop_once_and_the_wake_fd_is_drained(workloads):
    """The one signal's byte wakes one turn; the next select() waits again, here for the
    tick's timeout (a wake fd left readable would wake every turn at once)."""
    w = workloads(WAITS)
    woken: list[bool] = []  # from the workload's word on: whether a turn had the wake fd's

    def on_data(data: bytes) -> None:
        signal.raise_signal(signal.SIGURG)  # one signal, of those the loop does not relay

    class Ender(Reader):
        def ready(self, readable: list[int], writable: list[int]) -> None:
            super().ready(readable, writable)
            if self.fd in readable or woken:
                woken.append(bool(self.others[-1]))
            if len(woken) > 1 and not readable or sum(woken) > 2:
                loop.gone = True  # a turn the timeout ended (or a wake fd never drained)

    loop = Loop(w.pid, [Ender(w.stdout, on_data)], tick=lambda: 0.5)
    with deadline(), handlers((signal.SIGURG,), loop.signal):
        assert loop.run() is None
    assert woken == [False, True, False]


def test_the_loop_ends_without_a_status_when_a_dispatcher_says_launcher_is_gone(workloads):
    w = workloads(WAITS)

    def on_data(data: bytes) -> None:
        loop.gone = True

    loop = Loop(w.pid, [Reader(w.stdout, on_data)], tick=lambda: 0.05)
    with deadline():
        assert loop.run() is None
    assert not reaped(w.pid)  # still running: the caller stops its tree


def test_the_loop_leaves_no_fd_open_and_the_wakeup_fd_as_it_found_it(workloads):
    mine_r, mine_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    before = signal.set_wakeup_fd(mine_w)
    try:
        fds = sorted(os.listdir("/proc/self/fd"))
        w = workloads("raise SystemExit(0)")
        os.close(w.stdin)
        w.stdin = -1
        with deadline():
            assert Loop(w.pid, [], tick=lambda: 0.05).run() is not None
        os.close(w.stdout)
        w.stdout = -1
        assert sorted(os.listdir("/proc/self/fd")) == fds  # the wake pipe closed
        assert signal.set_wakeup_fd(-1) == mine_w  # ours again
    finally:
        signal.set_wakeup_fd(before)
        os.close(mine_r)
        os.close(mine_w)


def test_an_interrupted_select_goes_round_again(workloads):
    """A handler that raises InterruptedError (as an EINTR seen by Python code would) while
    the loop waits in select(): the loop goes round again, and returns the status."""
    w = workloads(WAITS)
    w.wait_for(b"ready")
    lines, start = inspect.getsourcelines(Loop.run)
    select_line = start + next(i for i, line in enumerate(lines) if "select.select(" in line)
    raised: list[bool] = []

    def interrupt(_sig: int, frame: Any) -> None:
        if raised or frame is None or frame.f_code is not Loop.run.__code__ or (
                frame.f_lineno != select_line):
            return  # not in select(): the next one
        raised.append(True)
        signal.setitimer(signal.ITIMER_REAL, 0)
        w.close_stdin()  # the workload ends: the loop has its status to return
        raise InterruptedError

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.02, 0.02)
    try:
        status = Loop(w.pid, [], tick=lambda: 0.2).run()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert raised == [True]
    assert status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


# --- signals heard ----------------------------------------------------------------------------


def test_heard_signals_are_relayed_in_order_each_told_to_on_signal_first(workloads):
    w = workloads("import os, signal, sys\n"
                  "for s in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGWINCH):\n"
                  "    signal.signal(s, lambda n, f: os.write(1, b'<%d>' % n))\n"
                  "signal.signal(signal.SIGTERM, lambda *a: sys.exit(3))\n"
                  "os.write(1, b'ready'); sys.stdin.read()\n")
    w.wait_for(b"ready")
    told: list[tuple[int, bytes]] = []
    loop = Loop(w.pid, [], tick=lambda: 0.05,
                on_signal=lambda sig: told.append((sig, w.said())))
    for sig in (signal.SIGUSR1, signal.SIGWINCH, signal.SIGUSR2):
        loop.signal(sig)
    assert loop.heard == [signal.SIGUSR1, signal.SIGWINCH, signal.SIGUSR2]
    with deadline():
        loop._signals()
        w.wait_for(b"<%d>" % signal.SIGUSR2)
    assert [sig for sig, _ in told] == [signal.SIGUSR1, signal.SIGWINCH, signal.SIGUSR2]
    assert b"<%d>" % signal.SIGUSR1 not in told[0][1]  # told before it was sent on
    assert loop.heard == []
    for sig in (signal.SIGUSR1, signal.SIGWINCH, signal.SIGUSR2):
        assert b"<%d>" % sig in w.said()
    loop.signal(signal.SIGTERM)  # without on_signal too
    loop.on_signal = None
    with deadline():
        status = loop.run()
    assert status is not None and os.WEXITSTATUS(status) == 3


def test_sigcont_goes_to_the_foreground_and_other_signals_are_not_relayed(workloads):
    class Foreground:
        conts = 0

        def continued(self) -> None:
            self.conts += 1

        def stopped(self, sig: int) -> None:  # pragma: no cover - not stopped here
            raise AssertionError(sig)

    w = workloads("import signal, sys\n"
                  "signal.signal(signal.SIGTERM, lambda *a: sys.exit(3))\n"
                  "sys.stdout.write('ready'); sys.stdout.flush(); sys.stdin.read()\n")
    w.wait_for(b"ready")
    fg = Foreground()
    told: list[int] = []
    loop = Loop(w.pid, [], tick=lambda: 0.05, foreground=fg, on_signal=told.append)
    for sig in (signal.SIGCONT, signal.SIGCHLD, signal.SIGTERM):
        loop.signal(sig)
    with deadline():
        status = loop.run()
    assert fg.conts == 1 and told == [signal.SIGTERM]
    assert status is not None and os.WEXITSTATUS(status) == 3
    alone = Loop(w.pid, [])  # no foreground: SIGCONT is noted, nothing else
    alone.signal(signal.SIGCONT)
    alone._signals()
    assert alone.heard == []


# a first process and its child in one group, each saying which signals reached it, the
# child until its stdin ends
FAMILY = """import os, signal, sys
if os.fork() == 0:
    for s, word in ((signal.SIGINT, b'child-int '), (signal.SIGTERM, b'child-term ')):
        signal.signal(s, lambda n, f, word=word: os.write(1, word))
    os.write(1, b'child-ready ')
    sys.stdin.read()
    os.write(1, b'child-eof ')
    os._exit(0)
signal.signal(signal.SIGINT, lambda *a: sys.exit(2))
signal.signal(signal.SIGTERM, lambda *a: sys.exit(3))
os.write(1, b'parent-ready ')
signal.pause()
"""


@pytest.mark.parametrize(("sig", "status", "child_heard"), [
    (signal.SIGINT, 2, True),  # a terminal's: the whole group
    (signal.SIGTERM, 3, False),  # `kill PID`'s: the first process alone
])
def test_a_relayed_signal_reaches_the_group_or_the_first_process(workloads, sig, status,
                                                                 child_heard):
    w = workloads(FAMILY)
    w.wait_for(b"child-ready ")
    w.wait_for(b"parent-ready ")
    relay(w.pid, sig)
    with deadline():
        _, got = os.waitpid(w.pid, 0)
    assert os.WIFEXITED(got) and os.WEXITSTATUS(got) == status
    w.close_stdin()  # the child's end: it says so last
    w.wait_for(b"child-eof ")
    words = w.said().split()
    assert (b"child-" + signal.Signals(sig).name[3:].lower().encode() in words) is child_heard
    assert words[-1] == b"child-eof" and len(words) == 3 + child_heard
    assert sig in RELAYED and (sig in TO_GROUP) is child_heard


def test_relaying_to_a_workload_that_is_gone_is_no_error():
    pid = spawn([PY, "-c", "pass"], dict(os.environ), [], set(), lambda _: None)
    os.waitpid(pid, 0)
    relay(pid, signal.SIGTERM)
    relay(pid, signal.SIGINT)


# --- reaping ----------------------------------------------------------------------------------


def test_one_reaping_collects_every_exited_child_and_the_workloads_status(workloads):
    w = workloads("raise SystemExit(7)")
    others = [spawn([PY, "-c", "pass"], dict(os.environ), [], set(), lambda _: None)
              for _ in range(3)]
    for pid in (w.pid, *others):
        wait_until(lambda pid=pid: zombie_or_stopped(pid, "Z"), timeout=30,
                   what=f"{pid} to exit")
    loop = Loop(w.pid, [])
    loop._reap()
    assert loop.status is not None and os.WEXITSTATUS(loop.status) == 7
    assert all(reaped(pid) for pid in others)
    loop._reap()  # no child left: nothing, and no error
    assert os.WEXITSTATUS(loop.status) == 7


def test_a_stop_goes_to_the_foreground_and_the_reaping_goes_on(workloads):
    class Foreground:
        def __init__(self) -> None:
            self.stops: list[int] = []

        def stopped(self, sig: int) -> None:
            self.stops.append(sig)

    # the workload first: the kernel reports children oldest first
    w = workloads("import os, signal; os.kill(os.getpid(), signal.SIGSTOP); "
                  "raise SystemExit(5)")
    others = [spawn([PY, "-c", "pass"], dict(os.environ), [], set(), lambda _: None)
              for _ in range(2)]
    wait_until(lambda: zombie_or_stopped(w.pid, "T"), timeout=30, what="the workload to stop")
    for pid in others:
        wait_until(lambda pid=pid: zombie_or_stopped(pid, "Z"), timeout=30,
                   what=f"{pid} to exit")
    fg = Foreground()
    loop = Loop(w.pid, [], tick=lambda: 0.05, foreground=fg)
    loop._reap()
    assert fg.stops == [signal.SIGSTOP] and loop.status is None  # stopped, not ended
    assert all(reaped(pid) for pid in others)
    os.kill(w.pid, signal.SIGCONT)
    with deadline():
        status = loop.run()
    assert status is not None and os.WEXITSTATUS(status) == 5


def test_a_stop_without_a_foreground_is_passed_over(workloads):
    w = workloads("import os, signal; os.kill(os.getpid(), signal.SIGSTOP); "
                  "raise SystemExit(6)")
    wait_until(lambda: zombie_or_stopped(w.pid, "T"), timeout=30, what="the workload to stop")
    loop = Loop(w.pid, [], tick=lambda: 0.05)
    loop._reap()
    assert loop.status is None
    os.kill(w.pid, signal.SIGCONT)
    with deadline():
        status = loop.run()
    assert status is not None and os.WEXITSTATUS(status) == 6


def test_the_loop_imports_where_typing_has_no_protocol():
    """An image's python3 may be 3.7, whose typing has no Protocol: the dispatchers' type is
    for the type checker alone."""
    code = ("import typing; del typing.Protocol\n"
            "import launcher.supervise.loop\n")
    proc = subprocess.run([PY, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
