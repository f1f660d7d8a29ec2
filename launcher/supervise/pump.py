"""The workload's output through the supervisor, in its one thread: each stream read in
chunks as it comes, passed on at once (order kept within a stream), and shown to the watch
(`on_data`: cycles, failure words) after it is passed on.

- A terminal stays a terminal: where the supervisor's stdout or stderr is one (`docker run -t`,
  compose `tty: true`, a native run at a shell), the workload writes there through a
  pseudo-terminal of the same settings and size (so `isatty()` and progress bars are as without
  launcher), its bytes passed on unchanged (no second CR before each LF).
- stdout and stderr that are one file (`2>&1`, one terminal) stay one: a single pipe or
  pseudo-terminal, so their lines keep the order they were written in.
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
import time
from collections.abc import Callable
from dataclasses import dataclass

READ = 1 << 20  # bytes a read takes at most
PIPE_SIZE = 1 << 20  # what the workload's pipe holds (fs.pipe-max-size's default)
F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ (Python 3.10+ has it; the images' may be older)
DRAIN_IDLE_S = 30.0  # after the workload's end: what its pipes hold, while bytes still move


@dataclass
class Stream:
    name: str  # stdout | stderr (one stream where both are one file: stdout)
    src: int  # the supervisor's end of the workload's pipe (or the terminal's master)
    dst: int  # where it goes: the supervisor's own fd 1 or 2
    blocking: bool  # dst may block (a terminal, a file): written as is when it can take it
    pending: bytes = b""
    eof: bool = False
    gone: bool = False  # the reader went away


class Pump:
    def __init__(self, on_data: Callable[[str, bytes], None]) -> None:
        self.on_data = on_data
        self.streams: list[Stream] = []
        self.child: dict[int, int] = {}  # the workload's fd -> the supervisor's fd it gets
        self.flags: dict[tuple[int, int], tuple[int, int]] = {}  # a file's flags before
        self.masters: list[int] = []  # pseudo-terminals', resized with the real ones
        self.said_to = 2  # the fd whose stream takes the supervisor's own lines
        self.closed = False
        usable = {fd: _stat(fd) for fd in (1, 2)}
        _fill_closed()  # a closed 0-2 is /dev/null: no pipe of ours may take its number
        try:
            for fd, name in ((1, "stdout"), (2, "stderr")):
                st = usable[fd]
                if st is None:
                    continue  # closed: the workload gets /dev/null there
                if fd == 2 and usable[1] is not None and os.path.samestat(st, usable[1]) \
                        and 1 in self.child:
                    self.child[2] = self.child[1]  # one file: one stream, its order kept
                    self.said_to = 1
                    continue
                self.child[fd] = (self._terminal(fd) if os.isatty(fd)
                                  else self._pipe(fd, name))
        except OSError:
            self.close()
            raise

    def _pipe(self, fd: int, name: str) -> int:
        r, w = os.pipe()
        with contextlib.suppress(OSError):
            fcntl.fcntl(w, F_SETPIPE_SZ, PIPE_SIZE)
        self.streams.append(Stream(name, r, fd, self._blocking(fd)))
        return w

    def _terminal(self, fd: int) -> int:
        import termios

        master, slave = os.openpty()
        with contextlib.suppress(termios.error, OSError):
            attrs = termios.tcgetattr(fd)
            attrs[1] &= ~termios.OPOST  # bytes as written: the real terminal adds the CRs
            termios.tcsetattr(slave, termios.TCSANOW, attrs)
        self.masters.append(master)
        self._resize(fd, master)
        self.streams.append(Stream("stdout" if fd == 1 else "stderr", master, fd, True))
        return slave

    def _blocking(self, fd: int) -> bool:
        """A pipe or socket is written without blocking (its flags restored at the end, once
        for each file); anything else (a file, /dev/null) takes a write at once."""
        st = os.fstat(fd)
        if not (stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode)):
            return True
        key = (st.st_dev, st.st_ino)
        if key not in self.flags:
            self.flags[key] = (fd, fcntl.fcntl(fd, fcntl.F_GETFL))
        fcntl.fcntl(fd, fcntl.F_SETFL, self.flags[key][1] | os.O_NONBLOCK)
        if stat.S_ISFIFO(st.st_mode):  # a read's worth in one write, not 16 turns of 64 KiB
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, F_SETPIPE_SZ, PIPE_SIZE)
        return False

    def resize(self) -> None:
        """The pseudo-terminals take the real ones' size (at the start, and at each
        SIGWINCH, before it is forwarded)."""
        for s in self.streams:
            if s.src in self.masters:
                self._resize(s.dst, s.src)

    @staticmethod
    def _resize(real: int, master: int) -> None:
        import termios

        with contextlib.suppress(OSError):
            size = fcntl.ioctl(real, termios.TIOCGWINSZ, b"\0" * 8)
            fcntl.ioctl(master, termios.TIOCSWINSZ, size)

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
        return [s.dst for s in self.streams if s.pending]

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
        except BlockingIOError:  # full: the rest when it can take more (select)
            pass
        except OSError:  # EPIPE and the like: the reader is gone
            view = memoryview(b"")
            self.gone(s.name)
        s.pending = bytes(view) if view else b""

    def say(self, data: bytes) -> bool:
        """The supervisor's own line, after what its stderr's stream holds (a write to a
        pipe made non-blocking could be refused and lost); False where no stream takes it
        (the caller writes it itself)."""
        for s in self.streams if not self.closed else ():
            if s.dst == self.said_to and not s.gone and not s.eof:
                s.pending += data
                self._write(s)
                return True
        return False

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
        """After the workload's tree is gone: what its pipes still hold, passed on, for as
        long as bytes move (a process the kernel cannot kill, in D state, may hold a pipe)."""
        import select

        moved = time.monotonic()
        while time.monotonic() - moved < DRAIN_IDLE_S:
            r, w = self.readable(), self.writable()
            if not r and not w:
                break
            ready_r, ready_w, _ = select.select(r, w, [], 1.0)
            if ready_r or ready_w:
                moved = time.monotonic()
                self.ready(ready_r, ready_w)

    def close(self) -> None:
        self.closed = True
        for s in self.streams:
            if not s.eof:
                s.eof = True
                os.close(s.src)
        for fd in set(self.child.values()):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.child = {}
        for fd, flags in self.flags.values():
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, fcntl.F_SETFL, flags)


def _stat(fd: int) -> os.stat_result | None:
    try:
        return os.fstat(fd)
    except OSError:
        return None


def _fill_closed() -> None:
    """/dev/null on a closed fd 0, 1 or 2: a pipe opened later would take that number, and be
    read as launcher's stdin or written as our stderr."""
    for fd in (0, 1, 2):
        if _stat(fd) is None:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)  # (inheritable, as dup2 makes it)
                os.close(null)
            else:
                os.set_inheritable(fd, True)  # the workload's too, as it was closed
