"""A container's stdin and terminal from launcher's side (`launcher run --image -i/-t`, as
`docker run -i/-t`): launcher's stdin relayed to the container's, this terminal in raw mode
while the container's terminal reads it, its size passed on; and the lifeline that replaces
the container's stdin then: a FIFO in the run folder (mounted into the container), held open by
launcher, whose end of file tells the supervisor that launcher is gone."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable, Iterator


class FifoLifeline:
    def __init__(self, path: str) -> None:
        self.path = path
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.mkfifo(path, 0o600)
        # read and write: opening never waits for the supervisor, and launcher's death (any
        # death) leaves the FIFO with no writer: the supervisor's end of file
        self.fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)

    def say(self, words: bytes) -> None:
        with contextlib.suppress(OSError):
            os.write(self.fd, words)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)
        with contextlib.suppress(OSError):
            os.unlink(self.path)


def relay_stdin(sock: socket.socket) -> threading.Thread:
    """launcher's stdin to the container's, as it comes; its end of file closes the
    container's (StdinOnce)."""

    def loop() -> None:
        with contextlib.suppress(OSError):
            while data := os.read(0, 65536):
                sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)

    t = threading.Thread(target=loop, name="launcher-stdin", daemon=True)
    t.start()
    return t


@contextlib.contextmanager
def raw_terminal(fd: int = 0) -> Iterator[bool]:
    """This terminal in raw mode while the container's reads it (its own line discipline
    echoes and turns Ctrl-C into SIGINT); as it was afterwards. Yields whether it is one."""
    import termios
    import tty

    try:
        saved = termios.tcgetattr(fd)
    except (termios.error, OSError):
        yield False
        return
    tty.setraw(fd, termios.TCSANOW)
    try:
        yield True
    finally:
        with contextlib.suppress(termios.error, OSError):
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def size(fd: int = 1) -> tuple[int, int] | None:
    """(rows, columns) of this terminal, where `fd` (else stdin) is one."""
    for each in (fd, 0):
        with contextlib.suppress(OSError):
            s = os.get_terminal_size(each)
            return s.lines, s.columns
    return None


def on_resize(resize: Callable[[int, int], None]) -> Callable[[], None]:
    """Pass this terminal's size on now and at each SIGWINCH (main thread only); what undoes
    the handler."""
    import signal

    def now(*_: object) -> None:
        got = size()
        if got is not None:
            with contextlib.suppress(Exception):
                resize(*got)

    now()
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    old = signal.signal(signal.SIGWINCH, now)
    return lambda: signal.signal(signal.SIGWINCH, old)
