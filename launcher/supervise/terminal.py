"""The terminal's foreground, as a shell hands it to a job (POSIX job control, FIELD.md 45).

The workload runs in a process group of its own. Where the supervisor has a controlling
terminal and its job holds the foreground (launcher's process group natively, PID 1's own in a
container with `-t`), the workload's group gets the foreground while it runs: Ctrl-C, Ctrl-\\
and Ctrl-Z reach each of its processes once, from the terminal itself, and a prompt on /dev/tty
reads and writes as without launcher. The supervisor ignores SIGTTOU and SIGTTIN (it never
reads the terminal), so it writes from the background even under `stty tostop`.

A workload stopped by Ctrl-Z stops the run: the foreground goes back to the job, and the job
that the shell waits for (launcher, or the supervisor run by hand) stops too, so the shell's
prompt returns; `fg` continues it and the workload gets the terminal again. PID 1 has no job
above it to stop: a stopped workload is continued, as Ctrl-Z does nothing to `docker run -it`.
Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import signal

from launcher.proctree import is_init


class Foreground:
    def __init__(self) -> None:
        self.tty: int | None = None
        self.job = os.getpgrp()  # the process group the shell waits for
        self.held = False  # the workload's group holds the foreground
        self.pgid = 0
        for sig in (signal.SIGTTOU, signal.SIGTTIN):
            signal.signal(sig, signal.SIG_IGN)  # the workload starts with the defaults
        try:
            fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError:
            return  # no controlling terminal (a pipe, CI, `docker run` without -t)
        try:
            fg = os.tcgetpgrp(fd)
        except OSError:
            os.close(fd)
            return
        parent = _pgid(os.getppid())
        if fg in (os.getpgrp(), parent):  # our job holds the terminal: the workload will
            self.tty, self.job = fd, fg
        else:  # a background job (`launcher run ... &`): the workload stays in the background
            os.close(fd)

    def give(self, pgid: int) -> None:
        """The terminal's foreground to the workload's group `pgid` (at its start, and after a
        `fg`)."""
        self.pgid = pgid
        if self.tty is not None and _set(self.tty, pgid):
            self.held = True

    def take_back(self) -> None:
        """The foreground back to the job (the workload ended or stopped)."""
        if self.tty is not None and self.held:
            with contextlib.suppress(OSError):
                if os.tcgetpgrp(self.tty) == self.pgid:
                    _set(self.tty, self.job)
            self.held = False

    def stopped(self, sig: int) -> None:
        """The workload's process stopped with `sig`. Before it had the terminal (it read it
        as it started): the terminal is handed over and it goes on. Else the run stops as a
        job does: the job above stops (its `fg` continues us: `continued`); PID 1 continues
        the workload."""
        if sig in (signal.SIGTTIN, signal.SIGTTOU) and self.tty is not None and not self.held \
                and _foreground(self.tty) == self.job:
            self.give(self.pgid)
            _cont(self.pgid)
            return
        if self.tty is None:  # no job control: stopped until someone continues it, as
            if is_init():  # without us; PID 1 has no job above it to stop
                _cont(self.pgid)
            return
        self.take_back()
        if is_init():
            _cont(self.pgid)
            return
        with contextlib.suppress(OSError):
            os.killpg(self.job, signal.SIGTSTP)  # the shell's prompt returns (ours too, by hand)

    def continued(self) -> None:
        """SIGCONT (`fg` or `bg` on the job): the workload goes on, with the terminal where
        the job holds it again (`fg`), in the background otherwise (`bg`)."""
        if self.pgid <= 0:
            return
        if self.tty is not None and _foreground(self.tty) == self.job:
            self.give(self.pgid)
        _cont(self.pgid)

    def close(self) -> None:
        self.take_back()
        if self.tty is not None:
            os.close(self.tty)
            self.tty = None


def _pgid(pid: int) -> int:
    try:
        return os.getpgid(pid)
    except OSError:
        return -1


def _foreground(fd: int) -> int:
    try:
        return os.tcgetpgrp(fd)
    except OSError:
        return -1


def _set(fd: int, pgid: int) -> bool:
    try:
        os.tcsetpgrp(fd, pgid)  # from the background: allowed, SIGTTOU being ignored
        return True
    except OSError:
        return False


def _cont(pgid: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGCONT)
