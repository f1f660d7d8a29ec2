"""The supervisor's one loop while the workload runs: one thread and select() over its
dispatchers (the output streams, the lifeline, the wake fd that signals write to), with the
timers' ticks between, as supervisord's and torchrun's agent's loops read. A watcher thread
would be one more task against the workload's pids limit (a limit of 2 leaves none for it).
Standard library only."""

from __future__ import annotations

import contextlib
import os
import select
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

# relayed to the workload's whole process group, as a terminal sends them; the rest to its
# first process, as `kill PID` and `docker stop` send them
TO_GROUP = (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGWINCH)
RELAYED = TO_GROUP + (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)


if TYPE_CHECKING:  # (typing.Protocol: 3.8; an image's python3 may be 3.7)
    from typing import Protocol

    class Dispatcher(Protocol):
        def readable(self) -> list[int]: ...  # pragma: no mutate
        def writable(self) -> list[int]: ...  # pragma: no mutate
        def ready(self, readable: list[int], writable: list[int]) -> None: ...  # pragma: no mutate


class Loop:
    def __init__(self, pid: int, dispatchers: list[Dispatcher],
                 tick: Callable[[], float] | None = None, foreground: Any = None,
                 on_signal: Callable[[int], None] | None = None) -> None:
        self.pid = pid
        self.dispatchers = dispatchers
        self.tick = tick
        self.foreground = foreground
        self.on_signal = on_signal  # a relayed signal, before it is sent on (SIGWINCH's resize)
        self.heard: list[int] = []  # signals since the last turn, in order
        self.gone = False  # set by a dispatcher: launcher went away
        self.status: int | None = None

    def signal(self, signum: int, _frame: object = None) -> None:
        """A signal handler: noted, and the wake fd wakes select()."""
        self.heard.append(signum)

    def run(self) -> int | None:
        """The workload's wait status; None when launcher went away first."""
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        old_fd = signal.set_wakeup_fd(wake_w)
        try:
            while True:
                self._signals()
                self._reap()
                if self.status is not None or self.gone:
                    return self.status
                timeout = self.tick() if self.tick is not None else None
                r, w = [wake_r], []
                for d in self.dispatchers:
                    r += d.readable()
                    w += d.writable()
                try:
                    ready_r, ready_w, _ = select.select(r, w, [], timeout)
                except InterruptedError:
                    continue
                if wake_r in ready_r:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_r, 4096)
                for d in self.dispatchers:
                    d.ready(ready_r, ready_w)
        finally:
            signal.set_wakeup_fd(old_fd)
            os.close(wake_r)
            os.close(wake_w)

    def _signals(self) -> None:
        while self.heard:
            sig = self.heard.pop(0)
            if sig == signal.SIGCONT:
                if self.foreground is not None:
                    self.foreground.continued()
            elif sig in RELAYED:
                if self.on_signal is not None:
                    self.on_signal(sig)
                relay(self.pid, sig)

    def _reap(self) -> None:
        """Every exited child collected (PID 1's and a subreaper's duty); the workload's own
        end kept, its stop handed to the terminal's foreground."""
        with contextlib.suppress(ChildProcessError):
            while True:
                done, status = os.waitpid(-1, os.WNOHANG | os.WUNTRACED)
                if done <= 0:
                    return
                if done != self.pid:
                    continue
                if os.WIFSTOPPED(status):
                    if self.foreground is not None:
                        self.foreground.stopped(os.WSTOPSIG(status))
                    continue
                self.status = status


def relay(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if sig in TO_GROUP:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
