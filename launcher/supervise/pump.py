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
- A reader that stalls never stalls the supervisor: a pipe is written through a file
  description of the supervisor's own (opened anew, non-blocking: the flags of the one it shares
  with other writers are never changed, FIELD.md 46), a socket with MSG_DONTWAIT, and the
  stream is not read again until what it holds is passed on, so the workload waits (as in a
  pipeline) while the samples, the growth and the stop go on; a reader may pause as long as it
  likes.
- Anything else (a file, /dev/null, /dev/full) the workload writes itself, its write errors its
  own (ENOSPC, as the shell would let it see them); a file is read back for the watch
  (`Tail`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import time
from collections.abc import Callable
from typing import Any

from launcher.proctree import is_init

READ = 1 << 20  # bytes a read takes at most
PIPE_SIZE = 1 << 20  # what the workload's pipe holds (fs.pipe-max-size's default)
F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ (Python 3.10+ has it; the images' may be older)
TAIL_S = 0.1  # between two reads of a file the workload writes itself
DRAIN_IDLE_S = 30.0  # after the workload's tree is gone: its pipes' writers' last bytes


class Stream:  # (a plain class: dataclasses costs ~8 ms of every container start)
    def __init__(self, name: str, src: int, dst: int, out: int, sock: Any = None) -> None:
        self.name = name  # stdout | stderr (one stream where both are one file: stdout)
        self.src = src  # the supervisor's end of the workload's pipe (or a terminal's master)
        self.dst = dst  # where it goes: the supervisor's own fd 1 or 2
        self.out = out  # the fd written: dst, or a non-blocking description of our own
        self.sock = sock  # dst is a socket: written with MSG_DONTWAIT
        self.pending = b""
        self.eof = False
        self.gone = False  # the reader went away
        self.last = b"\n"  # the last byte passed on (our lines start on their own)


class Tail:
    """A file the workload writes itself (stdout or stderr redirected to one), read back from
    where it stood at the start, for the watch."""

    def __init__(self, name: str, fd: int, st: os.stat_result) -> None:
        self.name = name
        self.st = st
        self.src = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
        self.at = os.lseek(fd, 0, os.SEEK_CUR)
        self.ours: list[tuple[int, int]] = []  # where the supervisor's own lines landed

    def read(self, on_data: Callable[[str, bytes], None], most: int = READ) -> bool:
        """What was written since the last read (up to `most` bytes), but for the
        supervisor's own lines; whether there was any."""
        try:
            data = os.pread(self.src, most, self.at)
        except OSError:
            return False
        start, self.at = self.at, self.at + len(data)
        if self.ours and data:
            data = self._theirs(data, start)
        if data:
            on_data(self.name, data)
        return bool(data)

    def _theirs(self, data: bytes, start: int) -> bytes:
        """`data` (read from `start`) without the bytes of our own lines."""
        end, at, kept = start + len(data), start, []
        for a, b in sorted(self.ours):
            if b > at and a < end:
                kept.append(data[at - start:max(a, at) - start])
                at = min(b, end)
        kept.append(data[at - start:])
        self.ours = [(a, b) for a, b in self.ours if b > end]
        return b"".join(kept)

    def said(self, fd: int, data: bytes) -> None:
        """The supervisor's line, written to the file itself (`fd`, which shares the
        workload's offset or appends), where it landed remembered."""
        n = os.write(fd, data)
        end = os.lseek(fd, 0, os.SEEK_CUR)
        self.ours.append((end - n, end))


class Pump:
    def __init__(self, on_data: Callable[[str, bytes], None], one_stream: bool = False) -> None:
        """`one_stream`: stdout and stderr are one file where launcher is (`2>&1` on the host
        of a container): the workload's are one stream here too, passed on as stdout."""
        self.on_data = on_data
        self.streams: list[Stream] = []
        self.child: dict[int, int] = {}  # the workload's fd -> the supervisor's fd it gets
        self.tails: list[Tail] = []  # files the workload writes itself, read back
        self.own: list[int] = []  # our descriptions of pipes and sockets written to
        self.masters: list[int] = []  # pseudo-terminals', resized with the real ones
        self._slaves: list[int] = []
        self.saved_mode: list[Any] | None = None  # the container terminal's, before raw
        self.said_to = 2  # the fd whose stream takes the supervisor's own lines
        self.closed = False
        usable = {fd: _stat(fd) for fd in (1, 2)}
        _fill_closed()  # a closed 0-2 is /dev/null: no pipe of ours may take its number
        try:
            for fd, name in ((1, "stdout"), (2, "stderr")):
                st = usable[fd]
                if st is None:
                    continue  # closed: the workload gets /dev/null there
                if fd == 2 and usable[1] is not None and 1 in self.child and (
                        one_stream or os.path.samestat(st, usable[1])):
                    self.child[2] = self.child[1]  # one file: one stream, its order kept
                    self.said_to = 1
                    continue
                if os.isatty(fd):
                    self.child[fd] = self._terminal(fd)
                elif stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode):
                    self.child[fd] = self._pipe(fd, name)
                else:  # the workload's own to write (its errors its own); read back
                    self._tail(fd, name, st)
        except OSError:
            self.close()
            raise

    def _pipe(self, fd: int, name: str) -> int:
        r, w = os.pipe()
        with contextlib.suppress(OSError):
            fcntl.fcntl(w, F_SETPIPE_SZ, PIPE_SIZE)
        out, sock = self._unblocked(fd)
        self.streams.append(Stream(name, r, fd, out, sock))
        return w

    def _tail(self, fd: int, name: str, st: os.stat_result) -> None:
        if self.tails and os.path.samestat(st, os.fstat(1)):
            return  # `>f 2>&1`: one file, read once
        if stat.S_ISREG(st.st_mode):
            with contextlib.suppress(OSError):  # not readable by us: not read
                self.tails.append(Tail(name, fd, st))

    def _terminal(self, fd: int) -> int:
        import termios

        master, slave = os.openpty()
        with contextlib.suppress(termios.error, OSError):
            attrs = termios.tcgetattr(fd)
            attrs[1] &= ~termios.OPOST  # bytes as written: the real terminal adds the CRs
            termios.tcsetattr(slave, termios.TCSANOW, attrs)
        self.masters.append(master)
        self._slaves.append(slave)
        self._resize(fd, master)
        self.streams.append(Stream("stdout" if fd == 1 else "stderr", master, fd, fd))
        return slave

    def _unblocked(self, fd: int) -> tuple[int, Any]:
        """How a pipe or socket is written without blocking and without touching the flags
        of the file description it shares with others: a pipe opened anew through /proc (a
        description of our own), a socket with MSG_DONTWAIT; where neither can be had, `fd`
        as it is (a write may then wait for the reader)."""
        if stat.S_ISSOCK(os.fstat(fd).st_mode):
            import socket

            return fd, socket.socket(fileno=os.dup(fd))
        try:
            out = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return fd, None
        self.own.append(out)
        with contextlib.suppress(OSError):  # a read's worth in one write, not 16 of 64 KiB
            fcntl.fcntl(out, F_SETPIPE_SZ, PIPE_SIZE)
        return out, None

    def resize(self) -> None:
        """The pseudo-terminals take the real ones' size (at the start, and at each
        SIGWINCH, before it is forwarded)."""
        self.follow()

    def follow(self) -> bool:
        """The pseudo-terminals take the real ones' size where it changed since the last look
        (no SIGWINCH of ours told of it); whether any did."""
        import termios

        changed = False
        for s in self.streams:
            if s.src in self.masters:
                real = _winsize(s.dst)
                if real is not None and real != _winsize(s.src):
                    with contextlib.suppress(OSError):
                        fcntl.ioctl(s.src, termios.TIOCSWINSZ, real)
                        changed = True
        return changed

    @staticmethod
    def _resize(real: int, master: int) -> None:
        import termios

        size = _winsize(real)
        if size is not None:
            with contextlib.suppress(OSError):
                fcntl.ioctl(master, termios.TIOCSWINSZ, size)

    def file_actions(self) -> list[tuple[int, int, int]]:
        """posix_spawn's: the workload's stdout and stderr (the pipes' ends are close-on-exec)."""
        from launcher.supervise.spawn import DUP2

        return [(DUP2, src, fd) for fd, src in self.child.items()]

    def console(self) -> str | None:
        """PID 1 of a container with a terminal (`docker run -t`, `launcher run --image -t`):
        the pseudo-terminal's path that becomes the workload's controlling terminal, all three
        of its fds; the container's terminal in raw mode, what is typed there relayed to it
        (its line discipline makes Ctrl-C one SIGINT to its foreground job, and bash has job
        control). None elsewhere."""
        if not is_init() or 1 not in self.child or not os.isatty(0) \
                or self.child[1] not in self._slaves:
            return None
        import termios
        import tty

        master = next(s.src for s in self.streams if s.dst == 1)
        with contextlib.suppress(termios.error, OSError):
            self.saved_mode = termios.tcgetattr(0)
            termios.tcsetattr(self.child[1], termios.TCSANOW, self.saved_mode)  # it cooks now
            tty.setraw(0, termios.TCSANOW)
        self.streams.append(Stream("stdin", 0, master, master))
        return os.ttyname(self.child[1])

    def spawned(self) -> None:
        """The workload holds its ends now: ours are closed, so its end of file is ours."""
        for fd in set(self.child.values()):
            os.close(fd)
        self.child = {}

    def readable(self) -> list[int]:
        return [s.src for s in self.streams if not s.eof and not s.pending]

    def writable(self) -> list[int]:
        return [s.out for s in self.streams if s.pending]

    def ready(self, readable: list[int], writable: list[int]) -> None:
        for s in self.streams:
            if s.out in writable and s.pending:
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
            if s.src != 0:
                os.close(s.src)
            return
        s.pending = data
        s.last = data[-1:]
        self._write(s)
        if s.src != 0:  # (stdin, relayed to a console: not the workload's output)
            self.on_data(s.name, data)  # after it is passed on: a line shown as it is written

    def tail(self) -> float:
        """The files the workload writes itself: what they gained, for the watch; the seconds
        until the next look (a tick of the loop)."""
        for t in self.tails:
            t.read(self.on_data)
        # a cycle line is read within a tenth of a second of its writing, as from a pipe
        return TAIL_S if self.tails else 3600.0

    def _write(self, s: Stream) -> None:
        view = memoryview(s.pending)
        try:
            while view:
                if s.sock is not None:
                    import socket

                    view = view[s.sock.send(view, socket.MSG_DONTWAIT):]
                else:
                    view = view[os.write(s.out, view):]
        except BlockingIOError:  # full: the rest when it can take more (select)
            pass
        except OSError:  # EPIPE and the like: the reader is gone
            view = memoryview(b"")
            self.gone(s.name)
        s.pending = bytes(view) if view else b""

    def say(self, data: bytes) -> bool:
        """The supervisor's own line, after what its stderr's stream holds (a write to a
        non-blocking pipe could be refused and lost), on a line of its own; False where no
        stream takes it (the caller writes it itself)."""
        for s in self.streams if not self.closed else ():
            if s.dst == self.said_to and not s.gone:
                if self.saved_mode is not None:  # a raw terminal: the CRs are ours to add
                    data = data.replace(b"\n", b"\r\n")
                s.pending += data if s.last == b"\n" else b"\n" + data
                s.last = b"\n"
                self._write(s)
                return True
        for t in self.tails if not self.closed else ():  # a file the workload writes too:
            st = _stat(self.said_to)  # its watch must not read our lines as the workload's
            if st is not None and os.path.samestat(st, t.st):
                with contextlib.suppress(OSError):
                    t.said(self.said_to, data)
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
        """After the workload's tree is gone: what its pipes still hold, passed on, however
        long the reader pauses (as in a pipeline). Only a pipe whose writer neither writes nor
        closes for DRAIN_IDLE_S (a process the kernel cannot kill, in D state) is given up."""
        import select

        for s in self.streams:
            if s.src == 0:  # a console's typing: no more of it
                s.eof = True
        moved = time.monotonic()
        while True:
            r, w = self.readable(), self.writable()
            if not r and not w:
                break
            if not w and time.monotonic() - moved >= DRAIN_IDLE_S:
                break  # nothing waits for the reader, and the writer says nothing
            ready_r, ready_w, _ = select.select(r, w, [], 1.0)
            if ready_r:
                moved = time.monotonic()
            self.ready(ready_r, ready_w)
        self.tail()

    def close(self) -> None:
        self.closed = True
        if self.saved_mode is not None:
            import termios

            with contextlib.suppress(termios.error, OSError):
                termios.tcsetattr(0, termios.TCSADRAIN, self.saved_mode)
            self.saved_mode = None
        for s in self.streams:
            if not s.eof:
                s.eof = True
                if s.src != 0:
                    os.close(s.src)
        for fd in set(self.child.values()):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.child = {}
        for s in self.streams:
            if s.sock is not None:
                s.sock.close()
        for fd in self.own:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.own = []
        for t in self.tails:
            with contextlib.suppress(OSError):
                os.close(t.src)
        self.tails = []


def _winsize(fd: int) -> bytes | None:
    """A terminal's size as TIOCGWINSZ gives it; None where `fd` is none."""
    import termios

    try:
        return fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8)
    except OSError:
        return None


def _stat(fd: int) -> os.stat_result | None:
    try:
        return os.fstat(fd)
    except OSError:
        return None


def _fill_closed() -> None:
    """/dev/null on a closed fd 0, 1 or 2: a pipe opened later would take that number, and be
    read as launcher's stdin or written as our stderr."""
    for fd in (0, 1, 2):  # in order: the lowest free number, which open takes, is fd's
        if _stat(fd) is None:
            os.set_inheritable(os.open(os.devnull, os.O_RDWR), True)  # the workload's too
