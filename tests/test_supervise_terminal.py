"""launcher/supervise/terminal.py, the terminal's foreground as a shell hands it to a job: each
case runs in a forked child that leads a session of its own with a fresh pseudo-terminal as its
controlling terminal (or none), starts a real workload process in a group of its own, and
checks with the kernel (tcgetpgrp, wait statuses, signals received) where the foreground is,
who is stopped and who is continued. PID 1's ways run in a PID namespace of their own."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import signal
import termios
from collections.abc import Callable
from typing import TypeVar

import pytest

from launcher.supervise import terminal
from launcher.supervise.terminal import Foreground
from tests.conftest import need
from tests.supervised import in_child, open_fds

T = TypeVar("T")
CLONE_NEWPID = 0x20000000


# --- helpers ------------------------------------------------------------------------------


def own_terminal() -> int:
    """This process: the leader of a new session whose controlling terminal is a new
    pseudo-terminal, on its fds 0-2 (a shell's). The terminal's master."""
    os.setsid()
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
    for fd in (0, 1, 2):
        os.dup2(slave, fd)
    os.close(slave)
    return master


def no_terminal() -> None:
    """This process: the leader of a new session without a controlling terminal (CI, a pipe,
    `docker run` without -t)."""
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


class Workload:
    """A child in a process group of its own (as spawn starts the workload), with the default
    stop signals; it runs `body` (its exit status) once told to go on."""

    def __init__(self, body: Callable[[], int] = lambda: 0) -> None:
        r, self.go = os.pipe()
        ready_r, ready_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # pragma: no cover - the workload
            status = 1
            try:
                os.setpgid(0, 0)
                for sig in (signal.SIGTTIN, signal.SIGTTOU, signal.SIGTSTP, signal.SIGCONT):
                    signal.signal(sig, signal.SIG_DFL)
                os.close(self.go)
                os.close(ready_w)  # its defaults set: a stop now stops it
                os.read(r, 1)
                status = body()
            finally:
                os._exit(status)
        os.setpgid(self.pid, self.pid)
        os.close(r)
        os.close(ready_w)
        os.read(ready_r, 1)  # end of file once it is ready
        os.close(ready_r)

    def start(self) -> None:
        os.write(self.go, b"g")
        os.close(self.go)

    def stop(self, sig: int = signal.SIGTSTP) -> int:
        """Stopped by `sig` (sent to its group, as the terminal sends Ctrl-Z); the stop
        signal the wait status reports."""
        os.killpg(self.pid, sig)
        return self.wait_stop()

    def wait_stop(self) -> int:
        _, status = os.waitpid(self.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status), status
        return os.WSTOPSIG(status)

    def continued(self) -> bool:
        """Whether it was continued since it stopped (reported once)."""
        done, status = os.waitpid(self.pid, os.WCONTINUED | os.WNOHANG)
        return done == self.pid and os.WIFCONTINUED(status)

    def end(self) -> int:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        return os.waitpid(self.pid, 0)[1]


def heard(*sigs: int) -> list[int]:
    """The list that handlers of `sigs` in this process append to."""
    got: list[int] = []
    for sig in sigs:
        signal.signal(sig, lambda s, _f: got.append(s))
    return got


def pid1(fn: Callable[[], T]) -> T:
    """fn() as PID 1 of a PID namespace of its own (a container's init)."""
    def unshared() -> object:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(CLONE_NEWPID) != 0:
            return ("unshare", os.strerror(ctypes.get_errno()))
        return in_child(fn)

    got = in_child(unshared)
    if isinstance(got, tuple) and got[:1] == ("unshare",):
        need("a PID namespace of its own (root)", got[1])
    return got  # type: ignore[return-value]


# --- holding the terminal -------------------------------------------------------------------


def test_the_foreground_goes_to_the_workload_and_comes_back_at_its_end():
    def case() -> dict[str, object]:
        own_terminal()
        before = open_fds()
        fg = Foreground()
        got: dict[str, object] = {
            "fresh": (fg.tty is not None, fg.job == os.getpgrp(), fg.held, fg.pgid),
            "ignored": [signal.getsignal(s) for s in (signal.SIGTTOU, signal.SIGTTIN)],
        }
        w = Workload()
        fg.give(w.pid)
        got["given"] = (os.tcgetpgrp(0) == w.pid, fg.held)
        w.start()
        os.waitpid(w.pid, 0)
        fg.close()
        got["back"] = (os.tcgetpgrp(0) == os.getpgrp(), fg.held, fg.tty)
        fg.close()  # a second time: nothing more
        got["left"] = sorted(open_fds() - before)
        return got

    got = in_child(case)
    assert got["fresh"] == (True, True, False, 0)
    assert got["ignored"] == [signal.SIG_IGN, signal.SIG_IGN]  # it writes from the background
    assert got["given"] == (True, True)
    assert got["back"] == (True, False, None)
    assert got["left"] == []


def test_a_group_the_terminal_refuses_is_not_held():
    """A group of another session (here: the test's own) cannot take the terminal: the
    foreground stays with the job and nothing is held, nor taken back."""
    def case() -> dict[str, object]:
        own_terminal()
        fg = Foreground()
        fg.give(os.getpgid(os.getppid()))
        got = {"held": fg.held, "fg_is_ours": os.tcgetpgrp(0) == os.getpgrp()}
        fg.close()
        return got

    assert in_child(case) == {"held": False, "fg_is_ours": True}


def test_the_foreground_the_workload_took_itself_is_left_to_it():
    """Taken back once (the workload stopped), the foreground is not taken back again when the
    workload's group took it itself meanwhile (a shell of its own that reads the terminal)."""
    def case() -> dict[str, object]:
        own_terminal()
        fg = Foreground()
        w = Workload()
        fg.give(w.pid)
        fg.take_back()
        got: dict[str, object] = {"back": (os.tcgetpgrp(0) == os.getpgrp(), fg.held)}
        os.tcsetpgrp(0, w.pid)  # as the workload's own tcsetpgrp (SIGTTOU ignored)
        fg.take_back()
        fg.close()
        got["kept"] = os.tcgetpgrp(0) == w.pid
        w.end()
        return got

    assert in_child(case) == {"back": (True, False), "kept": True}


def test_the_workload_that_passed_the_terminal_on_keeps_it_so():
    """The workload handed the foreground to a group of its own (a job of its shell): at the
    end the foreground is not snatched from that group."""
    def case() -> bool:
        own_terminal()
        fg = Foreground()
        w, other = Workload(), Workload()
        fg.give(w.pid)
        os.tcsetpgrp(0, other.pid)  # the workload's shell gives it to its job
        fg.close()
        kept = os.tcgetpgrp(0) == other.pid
        w.end()
        other.end()
        return kept

    assert in_child(case) is True


@pytest.mark.parametrize("where", ["our_group", "the_parents_group"])
def test_the_job_is_the_group_holding_the_terminal_ours_or_our_parents(where):
    """The supervisor in launcher's group, or in a group of its own under launcher (whose
    group holds the terminal): the job is the one the shell waits for."""
    def case() -> dict[str, object]:
        own_terminal()

        def inner() -> dict[str, object]:
            if where == "the_parents_group":
                os.setpgid(0, 0)
            fg = Foreground()
            got = {"tty": fg.tty is not None, "job_is_holder": fg.job == os.tcgetpgrp(0)}
            fg.close()
            return got

        return in_child(inner)

    assert in_child(case) == {"tty": True, "job_is_holder": True}


def test_a_background_job_leaves_the_terminal_alone():
    """`launcher run ... &`: another job holds the terminal; the workload stays in the
    background and no descriptor of the terminal is kept."""
    def case() -> dict[str, object]:
        own_terminal()
        shell_job = Workload()
        os.tcsetpgrp(0, shell_job.pid)  # another job in the foreground

        def inner() -> dict[str, object]:
            os.setpgid(0, 0)
            before = open_fds()
            fg = Foreground()
            w = Workload()
            fg.give(w.pid)
            got = {"tty": fg.tty, "held": fg.held, "left": sorted(open_fds() - before - {w.go}),
                   "fg_kept": os.tcgetpgrp(0) == shell_job.pid}
            w.end()
            return got

        got = in_child(inner)
        shell_job.end()
        return got

    assert in_child(case) == {"tty": None, "held": False, "left": [], "fg_kept": True}


def test_no_terminal_no_foreground_and_no_job_control():
    """Without a controlling terminal: nothing is held; a stopped workload stays stopped
    until someone continues it (no job above is stopped); `continued` continues it."""
    def case() -> dict[str, object]:
        no_terminal()
        tstp = heard(signal.SIGTSTP)
        fg = Foreground()
        w = Workload()
        fg.give(w.pid)
        got: dict[str, object] = {"state": (fg.tty, fg.held, fg.pgid == w.pid,
                                            fg.job == os.getpgrp())}
        got["stop"] = w.stop(signal.SIGSTOP)
        fg.stopped(signal.SIGSTOP)
        fg.stopped(signal.SIGTTIN)
        got["left_stopped"] = not w.continued()
        got["job_stopped"] = tstp[:]
        fg.continued()  # `kill -CONT` of the supervisor
        got["continued"] = w.continued()
        fg.take_back()
        fg.close()
        w.end()
        return got

    got = in_child(case)
    assert got["state"] == (None, False, True, True)
    assert got["stop"] == signal.SIGSTOP
    assert got["left_stopped"] is True and got["job_stopped"] == []
    assert got["continued"] is True


def test_continued_before_any_workload_continues_nobody():
    def case() -> list[int]:
        own_terminal()
        cont = heard(signal.SIGCONT)
        fg = Foreground()
        fg.continued()
        fg.close()
        return cont

    assert in_child(case) == []


# --- a stop, and fg or bg -----------------------------------------------------------------


def test_ctrl_z_stops_the_run_and_fg_gives_the_terminal_back_to_the_workload():
    """Ctrl-Z: the workload stops, the foreground goes back to the job and the job above is
    stopped too (the shell's prompt returns); `fg` (SIGCONT with the job in the foreground):
    the workload gets the terminal again and goes on."""
    def case() -> dict[str, object]:
        own_terminal()
        tstp = heard(signal.SIGTSTP)  # (an orphaned group's stop: seen by a handler)
        fg = Foreground()
        w = Workload()
        fg.give(w.pid)
        got: dict[str, object] = {"stop": w.stop(signal.SIGTSTP)}
        fg.stopped(signal.SIGTSTP)
        got["after_stop"] = (os.tcgetpgrp(0) == os.getpgrp(), fg.held, tstp[:],
                             w.continued())
        fg.continued()  # `fg`: the job holds the terminal again
        got["after_fg"] = (os.tcgetpgrp(0) == w.pid, fg.held, w.continued())
        w.end()
        fg.close()
        return got

    got = in_child(case)
    assert got["stop"] == signal.SIGTSTP
    assert got["after_stop"] == (True, False, [signal.SIGTSTP], False)
    assert got["after_fg"] == (True, True, True)


def test_bg_continues_the_workload_in_the_background():
    def case() -> dict[str, object]:
        own_terminal()
        heard(signal.SIGTSTP)
        fg = Foreground()
        w, shell = Workload(), Workload()
        fg.give(w.pid)
        w.stop(signal.SIGTSTP)
        fg.stopped(signal.SIGTSTP)
        os.tcsetpgrp(0, shell.pid)  # the shell's prompt holds the terminal; `bg`
        fg.continued()
        got = {"fg": os.tcgetpgrp(0) == shell.pid, "held": fg.held, "cont": w.continued()}
        w.end()
        shell.end()
        fg.close()
        return got

    assert in_child(case) == {"fg": True, "held": False, "cont": True}


@pytest.mark.parametrize("sig", [signal.SIGTTIN, signal.SIGTTOU])
def test_a_workload_that_met_the_terminal_from_the_background_gets_it_and_goes_on(sig):
    """The workload read (SIGTTIN) or set (SIGTTOU) the terminal while it was not in the
    foreground, its job holding the terminal: it is handed the terminal and continued, and
    its read then gets what is typed."""
    def case() -> dict[str, object]:
        master = own_terminal()
        tstp = heard(signal.SIGTSTP)
        fg = Foreground()

        def body() -> int:
            if sig == signal.SIGTTOU:  # setting the terminal from the background stops it
                termios.tcsetattr(0, termios.TCSANOW, termios.tcgetattr(0))
            return 0 if os.read(0, 100) == b"typed\n" else 3

        w = Workload(body)
        fg.give(w.pid)
        fg.take_back()  # (the foreground came back to the job, as after a stop)
        w.start()
        got: dict[str, object] = {"stop": w.wait_stop()}
        fg.stopped(sig)
        got["given"] = (os.tcgetpgrp(0) == w.pid, fg.held, tstp[:])
        os.write(master, b"typed\n")
        _, status = os.waitpid(w.pid, 0)
        got["status"] = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -status
        fg.close()
        got["back"] = os.tcgetpgrp(0) == os.getpgrp()
        return got

    got = in_child(case)
    assert got["stop"] == sig
    assert got["given"] == (True, True, [])
    assert got["status"] == 0 and got["back"] is True


def test_a_workload_that_read_the_terminal_it_held_stops_the_run():
    """A stop by SIGTTIN while the workload holds the terminal (a job of its own reading from
    the background): not the start's race, so the run stops as for Ctrl-Z."""
    def case() -> dict[str, object]:
        own_terminal()
        tstp = heard(signal.SIGTSTP)
        fg = Foreground()
        w = Workload()
        fg.give(w.pid)
        w.stop(signal.SIGTTIN)
        fg.stopped(signal.SIGTTIN)
        got = {"fg_ours": os.tcgetpgrp(0) == os.getpgrp(), "job": tstp[:],
               "cont": w.continued()}
        w.end()
        fg.close()
        return got

    assert in_child(case) == {"fg_ours": True, "job": [signal.SIGTSTP], "cont": False}


# --- PID 1 ----------------------------------------------------------------------------------


@pytest.mark.parametrize("with_terminal", [True, False], ids=["terminal", "no_terminal"])
def test_pid1_continues_a_stopped_workload_and_stops_nothing_above(with_terminal):
    """A container's init has no job above it: a stopped workload is continued (Ctrl-Z does
    nothing to `docker run -it`), the terminal back to PID 1's group meanwhile."""
    def case() -> dict[str, object]:
        if with_terminal:
            own_terminal()
        else:
            no_terminal()
        tstp = heard(signal.SIGTSTP)
        fg = Foreground()
        w = Workload()
        fg.give(w.pid)
        w.stop(signal.SIGTSTP)
        fg.stopped(signal.SIGTSTP)
        got = {"pid": os.getpid(), "tty": fg.tty is not None, "cont": w.continued(),
               "job": tstp[:], "fg_back": with_terminal and os.tcgetpgrp(0) == os.getpgrp(),
               "held": fg.held}
        w.end()
        fg.close()
        return got

    got = pid1(case)
    assert got == {"pid": 1, "tty": with_terminal, "cont": True, "job": [],
                   "fg_back": with_terminal, "held": False}


# --- the kernel refusing --------------------------------------------------------------------


def test_a_terminal_that_cannot_say_its_foreground_is_not_held(monkeypatch):
    """The terminal hung up between its open and the question (tcgetpgrp fails): no terminal,
    and its descriptor is not kept."""
    def case() -> dict[str, object]:
        own_terminal()
        before = open_fds()

        def hung_up(fd: int) -> int:
            raise OSError(errno.EIO, os.strerror(errno.EIO))

        monkeypatch.setattr(os, "tcgetpgrp", hung_up)
        fg = Foreground()
        return {"tty": fg.tty, "left": sorted(open_fds() - before)}

    assert in_child(case) == {"tty": None, "left": []}


def test_the_kernels_refusals_read_as_no_group():
    """No such process, not a terminal: -1 (never a group's id, nor 0, which tcgetpgrp says
    of a foreground outside our PID namespace)."""
    r, w = os.pipe()
    try:
        dead = os.fork()
        if dead == 0:  # pragma: no cover - ends at once
            os._exit(0)
        os.waitpid(dead, 0)
        assert terminal._pgid(dead) == -1
        assert terminal._foreground(r) == -1
        assert terminal._set(r, os.getpgrp()) is False
    finally:
        os.close(r)
        os.close(w)
