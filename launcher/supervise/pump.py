"""The workload's output through the supervisor, in its one thread: each stream read in
chunks as it comes, passed on at once (order kept within a stream), and shown to the watch
(`on_data`: cycles, failure words) after it is passed on.

- A terminal stays a terminal: where the supervisor's stdout is one (`docker run -t`, compose
  `tty: true`, a native run at a shell), the workload writes to a pseudo-terminal of the same
  settings and size (so `isatty()` and progress bars are as without launcher), its bytes
  passed on unchanged (no second CR before each LF).
- A reader that goes away (`| head -1`) ends the stream as a shell pipeline would: its pipe is
  closed, and the workload's next write meets SIGPIPE.
- A reader that stalls never stalls the supervisor: a pipe or socket is written without
  blocking, and the stream is not read again until what it holds is passed on, so the
  workload waits (as in a pipeline) while the samples, the growth and the stop go on.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass

READ = 1 << 20  # bytes a read takes at most
PIPE_SIZE = 1 << 20  # what the workload's pipe holds (fs.pipe-max-size's default)
F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ (Python 3.10+ has it; the images' may be older)


@dataclass
class Stream:
    name: str  # stdout | stderr
    src: int  # the supervisor's end of the workload's pipe (or the terminal's master)
    dst: int  # where it goes: the supervisor's own fd 1 or 2
    blocking: bool  # dst may block (a terminal, a file): written as is
    pending: bytes = b""
    eof: bool = False
    gone: bool = False  # the reader went away


class Pump:
    def __init__(self, on_data: Callable[[str, bytes], None]) -> None:
        self.on_data = on_data
        self.streams: list[Stream] = []
        self.child: dict[int, int] = {}  # the workload's fd -> the supervisor's fd it gets
        self.flags: dict[int, int] = {}  # dst -> its flags before (restored at the end)
        self.master: int | None = None  # a pseudo-terminal's, where stdout is a terminal
        if _usable(1) and os.isatty(1):
            self._terminal()
        for fd, name in ((1, "stdout"), (2, "stderr")):
            if fd in self.child or not _usable(fd):
                continue  # the terminal's, or closed: the workload gets it as it is
            r, w = os.pipe()
            with contextlib.suppress(OSError):
                fcntl.fcntl(w, F_SETPIPE_SZ, PIPE_SIZE)
            self.child[fd] = w
            self.streams.append(Stream(name, r, fd, self._blocking(fd)))

    def _terminal(self) -> None:
        import termios

        master, slave = os.openpty()
        with contextlib.suppress(termios.error, OSError):
            attrs = termios.tcgetattr(1)
            attrs[1] &= ~termios.OPOST  # bytes as written: the real terminal adds the CRs
            termios.tcsetattr(slave, termios.TCSANOW, attrs)
        self.master = master
        self.resize()
        self.child[1] = slave
        if _usable(2) and os.isatty(2):  # one terminal: both streams in it, as `docker -t`
            self.child[2] = slave
        self.streams.append(Stream("stdout", master, 1, True))

    def _blocking(self, fd: int) -> bool:
        """A pipe or socket is written without blocking (its flags restored at the end);
        anything else (a file, /dev/null) takes a write at once."""
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
            return True
        self.flags[fd] = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, self.flags[fd] | os.O_NONBLOCK)
        if stat.S_ISFIFO(mode):  # a read's worth in one write, not 16 turns of a 64 KiB pipe
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, F_SETPIPE_SZ, PIPE_SIZE)
        return False

    def resize(self) -> None:
        """The pseudo-terminal takes the real one's size (at the start, and at each
        SIGWINCH, before it is forwarded)."""
        if self.master is None:
            return
        import termios

        with contextlib.suppress(OSError):
            size = fcntl.ioctl(1, termios.TIOCGWINSZ, b"\0" * 8)
            fcntl.ioctl(self.master, termios.TIOCSWINSZ, size)

    def file_actions(self) -> list[tuple[int, int, int]]:
        """posix_spawn's: the workload's stdout and stderr (the pipes' ends are close-on-exec)."""
        return [(os.POSIX_SPAWN_DUP2, src, fd) for fd, src in self.child.items()]

    def spawned(self) -> None:
        """The workload holds its ends now: ours are closed, so its end of file is ours."""
        for fd in set(self.child.values()):
            os.close(fd)
        self.child = {}

    def readable(self) -> list[int]:
        return [s.src for s in self.streams if not s.eof and not s.pending]

    def writable(self) -> list[int]:
        return [s.dst for s in self.streams if s.pending and not s.blocking]

    def ready(self, readable: list[int], writable: list[int]) -> None:
        for s in self.streams:
            if s.dst in writable and s.pending:
                self._write(s)
            if s.src in readable and not s.eof and not s.pending:
                self._read(s)

    def _read(self, s: Stream) -> None:
        try:
            data = os.read(s.src, READ)
        except BlockingIOError:
            return
        except OSError:  # EIO: the terminal's last writer is gone
            data = b""
        if not data:
            s.eof = True
            os.close(s.src)
            return
        s.pending = data
        self._write(s)
        self.on_data(s.name, data)  # after it is passed on: a line shown as it is written

    def _write(self, s: Stream) -> None:
        view = memoryview(s.pending)
        try:
            while view:
                view = view[os.write(s.dst, view):]
        except BlockingIOError:
            pass
        except OSError:  # EPIPE and the like: the reader is gone
            view = memoryview(b"")
            self.gone(s.name)
        s.pending = bytes(view) if view else b""

    def gone(self, name: str) -> None:
        """The reader of `name` went away: the workload's next write there meets a closed
        pipe (SIGPIPE), as in a shell pipeline."""
        for s in self.streams:
            if s.name == name and not s.gone:
                s.gone, s.pending = True, b""
                if not s.eof:
                    s.eof = True
                    os.close(s.src)

    def drain(self) -> None:
        """After the workload's tree is gone: what its pipes still hold, passed on."""
        import select

        while True:
            r, w = self.readable(), self.writable()
            if not r and not w and not any(s.pending for s in self.streams):
                break
            for s in self.streams:
                if s.pending and s.blocking:
                    self._write(s)
            if r or w:
                ready_r, ready_w, _ = select.select(r, w, [], 1.0)
                self.ready(ready_r, ready_w)

    def close(self) -> None:
        for s in self.streams:
            if not s.eof:
                s.eof = True
                os.close(s.src)
        for fd, flags in self.flags.items():
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, fcntl.F_SETFL, flags)


def _usable(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False
