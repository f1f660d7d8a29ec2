"""launcher/supervise/pump.py, the workload's output through the supervisor: each case runs in
a forked child that sets up its own fds 0-2 as launcher's would be (pipes, a socket, files, a
pseudo-terminal, closed ones), starts a real workload on the pump's ends and checks what the
readers, the watch (`on_data`) and the kernel's descriptors see. A child that hangs dies by
SIGALRM, so a pump that blocks fails its test instead of stalling the run."""

from __future__ import annotations

import ctypes
import fcntl
import os
import resource
import select
import signal
import socket
import struct
import sys
import termios
import threading
from collections.abc import Callable
from typing import TypeVar

import pytest

from launcher.supervise import pump as pump_mod
from launcher.supervise.pump import Pump
from launcher.supervise.spawn import spawn
from tests.conftest import need
from tests.supervised import in_child, open_fds, wait_status

T = TypeVar("T")
PY = sys.executable
MB = 1 << 20
F_SETPIPE_SZ = 1031
F_GETPIPE_SZ = 1032
Seen = list[tuple[str, bytes]]


# --- helpers ------------------------------------------------------------------------------


def start(pump: Pump, script: str, stdin: int | None = None) -> int:
    """`sh -c script` on the pump's ends (and `stdin`), as the supervisor starts the workload;
    then the pump's copies of those ends are closed."""
    from launcher.supervise.spawn import DUP2

    actions = pump.file_actions()
    if stdin is not None:
        actions.append((DUP2, stdin, 0))
    pid = spawn(["sh", "-c", script], dict(os.environ), actions, set(), lambda _: None)
    pump.spawned()
    return pid


def start_py(pump: Pump, code: str, stdin: int | None = None) -> int:
    from launcher.supervise.spawn import DUP2

    actions = pump.file_actions()
    if stdin is not None:
        actions.append((DUP2, stdin, 0))
    pid = spawn([PY, "-c", code], dict(os.environ), actions, set(), lambda _: None)
    pump.spawned()
    return pid


def drain_nonblocking(fd: int) -> bytes:
    """What a pipe, socket or terminal's master holds now."""
    os.set_blocking(fd, False)
    out = b""
    while True:
        try:
            data = os.read(fd, MB)
        except (BlockingIOError, OSError):
            return out
        if not data:
            return out
        out += data


def pipe_on(fd: int) -> int:
    """A pipe whose write end is `fd` now; its read end."""
    r, w = os.pipe()
    os.dup2(w, fd)
    os.close(w)
    return r


def recorder() -> tuple[Seen, Callable[[str, bytes], None]]:
    seen: Seen = []
    return seen, lambda name, data: seen.append((name, data))


def joined(seen: Seen, name: str) -> bytes:
    return b"".join(d for n, d in seen if n == name)


# --- pipes --------------------------------------------------------------------------------


def test_two_pipes_are_two_streams_each_relayed_and_the_watch_told_which():
    def case() -> dict[str, object]:
        out, err = pipe_on(1), pipe_on(2)
        flags = fcntl.fcntl(1, fcntl.F_GETFL)
        before = open_fds()
        seen, on_data = recorder()
        pump = Pump(on_data)
        ends = set(pump.child.values())
        got: dict[str, object] = {
            "two": pump.child[1] != pump.child[2],
            "workload_pipe": fcntl.fcntl(pump.child[1], F_GETPIPE_SZ),
            "readers_pipe": fcntl.fcntl(1, F_GETPIPE_SZ),
            "flags_kept": fcntl.fcntl(1, fcntl.F_GETFL) == flags,
        }
        pid = start(pump, "printf 'out\\n'; printf 'err\\n' >&2; printf 'more\\n'")
        got["ours_closed"] = not ends & open_fds()  # the workload holds them now
        got["status"] = wait_status(pid)
        pump.drain()
        got["said"] = pump.say(b"launcher: done\n")
        pump.close()
        got["left"] = sorted(open_fds() - before)
        got["out"], got["err"] = drain_nonblocking(out), drain_nonblocking(err)
        got["seen"] = sorted(seen)
        got["said_after_close"] = pump.say(b"launcher: late\n")
        got["nothing_after_close"] = (pump.readable(), pump.writable(), pump.file_actions())
        return got

    got = in_child(case)
    assert got["two"] and got["status"] == 0
    assert got["workload_pipe"] == MB and got["readers_pipe"] == MB  # a read's worth, one write
    assert got["flags_kept"] and got["ours_closed"]
    assert got["out"] == b"out\nmore\n"
    assert got["err"] == b"err\nlauncher: done\n"  # our line: stderr's, on a line of its own
    assert got["said"] is True and got["said_after_close"] is False
    assert joined(got["seen"], "stdout") == b"out\nmore\n"  # type: ignore[arg-type]
    assert joined(got["seen"], "stderr") == b"err\n"  # type: ignore[arg-type]
    assert {n for n, _ in got["seen"]} == {"stdout", "stderr"}  # type: ignore[union-attr]
    assert got["left"] == []  # every descriptor of ours closed
    assert got["nothing_after_close"] == ([], [], [])


@pytest.mark.parametrize("how", ["2>&1", "one_stream"])
def test_one_file_or_launchers_word_makes_one_stream_in_the_order_written(how):
    """`2>&1` (one pipe) here, or launcher saying so (a container's two pipes that are one
    file on the host): one stream, named stdout, its lines in the order written."""
    def case() -> dict[str, object]:
        out = pipe_on(1)
        if how == "2>&1":
            os.dup2(1, 2)
        else:
            err = pipe_on(2)
        seen, on_data = recorder()
        pump = Pump(on_data, one_stream=how == "one_stream")
        got: dict[str, object] = {"one": pump.child[2] == pump.child[1]}
        pid = start(pump, "printf 'a\\n'; printf 'b\\n' >&2; printf 'c'; printf 'd\\n' >&2")
        wait_status(pid)
        pump.drain()
        got["said"] = pump.say(b"launcher: done\n")
        pump.close()
        got["out"] = drain_nonblocking(out)
        got["err"] = drain_nonblocking(err) if how == "one_stream" else b""
        got["names"] = sorted({n for n, _ in seen})
        got["watched"] = joined(seen, "stdout")
        return got

    got = in_child(case)
    assert got["one"] is True and got["said"] is True
    assert got["out"] == b"a\nb\ncd\nlauncher: done\n"
    assert got["err"] == b""
    assert got["names"] == ["stdout"] and got["watched"] == b"a\nb\ncd\n"


def test_our_lines_start_on_a_line_of_their_own_and_end_it():
    def case() -> bytes:
        out = pipe_on(1)
        os.dup2(1, 2)
        pump = Pump(lambda *_: None)
        pid = start(pump, "printf 'no newline'")
        wait_status(pid)
        pump.drain()
        pump.say(b"launcher: one\n")  # after the workload's unfinished line: a newline first
        pump.say(b"launcher: two\n")  # after ours: none
        first = drain_nonblocking(out)  # written at once, not left for the loop
        pump.close()
        return first

    assert in_child(case) == b"no newline\nlauncher: one\nlauncher: two\n"


def test_a_line_that_ends_a_chunk_needs_no_newline_before_ours():
    def case() -> bytes:
        out = pipe_on(1)
        os.dup2(1, 2)
        pump = Pump(lambda *_: None)
        pid = start(pump, "printf 'abc\\n'")
        wait_status(pid)
        pump.drain()
        pump.say(b"launcher: done\n")
        pump.close()
        return drain_nonblocking(out)

    assert in_child(case) == b"abc\nlauncher: done\n"


def test_the_watch_sees_a_chunk_only_after_it_is_passed_on():
    def case() -> list[tuple[bytes, bytes]]:
        out = pipe_on(1)
        os.dup2(1, 2)
        os.set_blocking(out, False)
        shown: list[tuple[bytes, bytes]] = []

        def on_data(name: str, data: bytes) -> None:  # what the reader holds by then
            shown.append((data, drain_nonblocking(out)))

        pump = Pump(on_data)
        pid = start(pump, "printf 'epoch 1\\n'")
        wait_status(pid)
        pump.drain()
        pump.close()
        return shown

    assert in_child(case) == [(b"epoch 1\n", b"epoch 1\n")]


@pytest.mark.parametrize("kind", ["pipe", "socket"])
def test_a_stalled_reader_stalls_neither_the_supervisor_nor_loses_a_byte(kind):
    """The reader reads nothing for a while (a pipe or socket of a few KiB, full): the
    supervisor keeps what it read (pending), reads no more of that stream meanwhile, and never
    blocks, while the workload writes on into its own pipe and ends; then the reader reads
    again, and drain passes on every byte, in order, however long it paused."""
    def case() -> dict[str, object]:
        if kind == "pipe":
            reader = pipe_on(1)
        else:
            a, b = socket.socketpair()
            os.dup2(a.fileno(), 1)
            a.close()
            b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            reader = b.detach()
        os.dup2(1, 2)
        flags = fcntl.fcntl(1, fcntl.F_GETFL)
        before = open_fds()
        pump = Pump(lambda *_: None)
        if kind == "pipe":  # the reader's pipe: a page (ours asked for a megabyte)
            fcntl.fcntl(1, F_SETPIPE_SZ, 4096)
        else:
            with socket.socket(fileno=os.dup(1)) as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        pid = start(pump, "seq 1 20000")  # ~108 KB
        stalled, status = [], None
        while status is None:  # the loop goes on: select() and ready(), never blocked
            r, w, _ = select.select(pump.readable(), pump.writable(), [], 0.05)
            pump.ready(r, w)
            stalled.append(bool(pump.writable()) and pump.readable() == [])
            done, st = os.waitpid(pid, os.WNOHANG)
            status = st if done else None
        got: dict[str, object] = {"status": status, "stalled": stalled[-1],
                                  "pending": bool(pump.writable())}
        expected = b"".join(b"%d\n" % i for i in range(1, 20001))
        chunks: list[bytes] = []

        def read() -> None:  # the reader reads again (as another process would)
            total = 0
            while total < len(expected):
                data = os.read(reader, MB)
                if not data:
                    return
                chunks.append(data)
                total += len(data)

        t = threading.Thread(target=read, daemon=True)
        t.start()
        pump.drain()
        t.join(10)
        got["flags_kept"] = fcntl.fcntl(1, fcntl.F_GETFL) == flags
        pump.close()
        got["left"] = sorted(open_fds() - before)
        got["whole"] = b"".join(chunks) == expected
        return got

    got = in_child(case)
    assert got["status"] == 0 and got["stalled"] is True and got["pending"] is True
    assert got["whole"] is True and got["flags_kept"] is True
    assert got["left"] == []


@pytest.mark.parametrize("pipe", ["anonymous", "named"])
def test_a_reader_already_gone_ends_the_workload_by_sigpipe(pipe, tmp_path):
    """`launcher run -- yes | true` once true has exited (or `> fifo` whose reader left): the
    write meets EPIPE and the stream is closed, so the workload's next write meets SIGPIPE, as
    in a shell pipeline. A FIFO without a reader cannot be opened anew (ENXIO): it is written
    as it is."""
    def case() -> dict[str, object]:
        if pipe == "anonymous":
            r = pipe_on(1)
        else:
            os.mkfifo(tmp_path / "fifo")
            r = os.open(tmp_path / "fifo", os.O_RDONLY | os.O_NONBLOCK)
            w = os.open(tmp_path / "fifo", os.O_WRONLY)
            os.dup2(w, 1)
            os.close(w)
        os.dup2(1, 2)
        os.close(r)  # the reader is gone
        pump = Pump(lambda *_: None)
        got: dict[str, object] = {"own": len(pump.own)}
        pid = start(pump, "while :; do echo y; done")
        pump.drain()  # reads, meets EPIPE, closes the stream: drain ends
        status = wait_status(pid)
        got["signal"] = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        got["readable"], got["writable"] = pump.readable(), pump.writable()
        got["said"] = pump.say(b"launcher: done\n")
        pump.close()
        return got

    got = in_child(case)
    assert got["own"] == (1 if pipe == "anonymous" else 0)
    assert got["signal"] == signal.SIGPIPE
    assert got["readable"] == [] and got["writable"] == []
    assert got["said"] is False  # nobody reads it: the caller writes it itself


def test_a_reader_gone_on_stdout_closes_that_stream_alone():
    """launcher's `closed stdout` (its reader went away): the workload's next write to stdout
    meets SIGPIPE, its stderr is still relayed, and our lines still go there."""
    def case() -> dict[str, object]:
        out, err = pipe_on(1), pipe_on(2)
        seen, on_data = recorder()
        pump = Pump(on_data)
        stdin_r, stdin_w = os.pipe()
        pid = start(pump, "printf 'err\\n' >&2; read x; printf 'late\\n' >&2; echo y; "
                    "printf 'never\\n' >&2", stdin=stdin_r)
        os.close(stdin_r)
        pump.gone("stdout")
        pump.gone("stdout")  # said twice: once is enough
        os.write(stdin_w, b"go\n")
        os.close(stdin_w)
        status = wait_status(pid)
        pump.drain()
        got: dict[str, object] = {"said": pump.say(b"launcher: done\n")}
        pump.close()
        got["signal"] = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        got["out"], got["err"] = drain_nonblocking(out), drain_nonblocking(err)
        got["watched_err"] = joined(seen, "stderr")
        return got

    got = in_child(case)
    assert got["signal"] == signal.SIGPIPE
    assert got["out"] == b""
    assert got["err"] == b"err\nlate\nlauncher: done\n" and got["said"] is True
    assert got["watched_err"] == b"err\nlate\n"


def test_a_reader_gone_on_stderr_leaves_our_lines_to_the_caller():
    def case() -> dict[str, object]:
        out, err = pipe_on(1), pipe_on(2)
        pump = Pump(lambda *_: None)
        pump.gone("stderr")
        got: dict[str, object] = {"said": pump.say(b"launcher: note\n")}
        pid = start(pump, "echo out")
        wait_status(pid)
        pump.drain()
        pump.close()
        got["out"], got["err"] = drain_nonblocking(out), drain_nonblocking(err)
        return got

    got = in_child(case)
    assert got == {"said": False, "out": b"out\n", "err": b""}


def test_drain_gives_up_on_a_writer_silent_for_the_idle_time_after_reading_all_it_said():
    """After the workload's tree is gone, a pipe whose writer still holds it (a process the
    kernel cannot kill) but says nothing for DRAIN_IDLE_S is given up; a writer that keeps
    writing is read as long as it writes."""
    def case() -> dict[str, object]:
        out = pipe_on(1)
        os.dup2(1, 2)
        pump_mod.DRAIN_IDLE_S = 1.0
        pump = Pump(lambda *_: None)
        stdin_r, stdin_w = os.pipe()
        pid = start_py(pump, "import sys, time\n"
                             "end = time.monotonic() + 1.6\n"
                             "while time.monotonic() < end:\n"
                             "    print('tick', flush=True); time.sleep(0.02)\n"
                             "print('last', flush=True)\n"
                             "sys.stdin.read()\n", stdin=stdin_r)
        os.close(stdin_r)
        pump.drain()  # from its start: the workload writes for longer than the idle time
        held = os.waitpid(pid, os.WNOHANG)[0] == 0  # it still holds its pipe, silent
        os.close(stdin_w)
        wait_status(pid)
        got = {"held": held, "out": drain_nonblocking(out)}
        pump.close()
        return got

    got = in_child(case)
    assert got["held"] is True
    assert got["out"].endswith(b"tick\nlast\n")  # type: ignore[union-attr]


# --- descriptors: closed ones, a failed start, close --------------------------------------


def test_closed_stdin_and_stderr_are_dev_null_and_no_pipe_takes_their_numbers():
    def case() -> dict[str, object]:
        out = pipe_on(1)
        os.close(0)
        os.close(2)
        seen, on_data = recorder()
        pump = Pump(on_data)
        null = os.stat(os.devnull)
        got: dict[str, object] = {
            "null": [os.path.samestat(os.fstat(fd), null) for fd in (0, 2)],
            "inheritable": [os.get_inheritable(fd) for fd in (0, 1, 2)],
            "ends": sorted(pump.child),
            "numbers": sorted({*pump.child.values(), *(s.src for s in pump.streams),
                               *pump.own}),
        }
        pid = start(pump, "echo out; echo err >&2")
        got["status"] = wait_status(pid)
        pump.drain()
        got["said"] = pump.say(b"launcher: note\n")
        pump.close()
        got["out"], got["seen"] = drain_nonblocking(out), seen
        return got

    got = in_child(case)
    assert got["null"] == [True, True] and got["inheritable"] == [True, True, True]
    assert got["ends"] == [1]  # stderr closed: the workload's is /dev/null
    assert min(got["numbers"]) > 2  # type: ignore[type-var]
    assert got["status"] == 0 and got["out"] == b"out\n"
    assert got["seen"] == [("stdout", b"out\n")]
    assert got["said"] is False  # no stream of stderr: the caller writes it (to /dev/null)


def test_a_closed_stdout_leaves_stderr_relayed():
    def case() -> dict[str, object]:
        err = pipe_on(2)
        os.close(1)
        seen, on_data = recorder()
        pump = Pump(on_data)
        got: dict[str, object] = {
            "null": os.path.samestat(os.fstat(1), os.stat(os.devnull)),
            "ends": sorted(pump.child),
            "numbers": sorted({*pump.child.values(), *(s.src for s in pump.streams)}),
        }
        pid = start(pump, "echo out; echo err >&2")
        wait_status(pid)
        pump.drain()
        got["said"] = pump.say(b"launcher: note\n")
        pump.close()
        got["err"], got["seen"] = drain_nonblocking(err), seen
        return got

    got = in_child(case)
    assert got["null"] is True and got["ends"] == [2]
    assert min(got["numbers"]) > 2  # type: ignore[type-var]
    assert got["err"] == b"err\nlauncher: note\n" and got["said"] is True
    assert got["seen"] == [("stderr", b"err\n")]


def test_a_pump_that_cannot_be_set_up_raises_and_leaves_no_descriptor_behind():
    def case() -> dict[str, object]:
        pipe_on(1)
        pipe_on(2)
        highest = max(open_fds())
        filler = []
        while (fd := os.open(os.devnull, os.O_RDONLY)) <= highest:  # no hole below
            filler.append(fd)
        os.close(fd)
        before = open_fds()
        # room for stdout's pipe and our description of it (3), not for stderr's pipe (2)
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 5, hard))
        try:
            Pump(lambda *_: None)
        except OSError as exc:
            raised: object = exc.errno
        else:
            raised = None
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        return {"raised": raised, "left": sorted(open_fds() - before)}

    import errno

    assert in_child(case) == {"raised": errno.EMFILE, "left": []}


def test_close_twice_never_closes_a_descriptor_it_gave_up():
    """close() is the end of each of our descriptors (a stream's, the workload's ends, our
    descriptions, a file's read-back): a second close() leaves alone the numbers the process
    has opened since."""
    def case() -> dict[str, object]:
        pipe_on(1)
        log = os.open("/tmp", os.O_TMPFILE | os.O_RDWR)
        os.dup2(log, 2)
        os.close(log)
        before = open_fds()
        pump = Pump(lambda *_: None)
        mine = open_fds() - before
        pump.close()
        got: dict[str, object] = {"had": len(mine), "left": sorted(open_fds() - before)}
        reused = [os.open(os.devnull, os.O_RDONLY) for _ in mine]
        pump.close()
        got["kept"] = sorted(fd for fd in reused if fd in open_fds())
        got["reused"] = sorted(reused)
        got["after"] = (pump.readable(), pump.writable(), pump.file_actions(), pump.tails)
        return got

    got = in_child(case)
    assert got["had"] == 4  # stdout's pipe (2), our description of it, the file's read-back
    assert got["left"] == [] and got["kept"] == got["reused"]
    assert got["after"] == ([], [], [], [])


def test_the_workloads_ends_are_closed_once_it_has_them():
    def case() -> dict[str, object]:
        pipe_on(1)
        pipe_on(2)
        pump = Pump(lambda *_: None)
        ends = sorted(set(pump.child.values()))
        pid = start(pump, "exit 0")
        got: dict[str, object] = {"open": [fd in open_fds() for fd in ends],
                                  "actions": pump.file_actions()}
        reused = [os.open(os.devnull, os.O_RDONLY) for _ in ends]
        wait_status(pid)
        pump.drain()  # each stream at its end of file: the workload's ends were the last
        pump.close()
        got["kept"] = [fd in open_fds() for fd in reused]
        return got

    got = in_child(case)
    assert got == {"open": [False, False], "actions": [], "kept": [True, True]}


# --- files the workload writes itself -------------------------------------------------------


def test_a_file_is_the_workloads_own_and_read_back_from_where_it_stood(tmp_path):
    """`>log 2>&1`: the workload writes the file itself, the watch reads it back from where it
    stood at the start, once (one file), and our lines land in the file but not in the
    watch."""
    def case(path: str) -> dict[str, object]:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
        os.write(fd, b"old\n")
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        seen, on_data = recorder()
        pump = Pump(on_data)
        got: dict[str, object] = {"child": dict(pump.child), "tails": len(pump.tails),
                                  "tick": pump.tail()}
        pid = start(pump, "printf 'a\\n'; printf 'b\\n' >&2")
        wait_status(pid)
        got["said"] = pump.say(b"launcher: note\n")
        os.write(1, b"c\n")  # (the workload, writing on)
        pump.drain()  # the file's last bytes read at the end
        pump.close()
        got["seen"], got["tick_after"] = seen, pump.tail()
        with open(path, "rb") as f:
            got["file"] = f.read()
        return got

    got = in_child(lambda: case(str(tmp_path / "log")))
    assert got["child"] == {} and got["tails"] == 1 and got["said"] is True
    assert 0 < got["tick"] <= 0.1  # type: ignore[operator]
    assert got["tick_after"] >= 3600  # type: ignore[operator]
    assert got["file"] == b"old\na\nb\nlauncher: note\nc\n"
    assert joined(got["seen"], "stdout") == b"a\nb\nc\n"  # type: ignore[arg-type]
    assert {n for n, _ in got["seen"]} == {"stdout"}  # type: ignore[union-attr]


def test_our_line_is_left_out_of_the_watch_across_reads_of_any_size(tmp_path):
    def case(path: str) -> tuple[list[bytes], list[int]]:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
        os.write(fd, b"old\n")
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        pump = Pump(lambda *_: None)
        tail = pump.tails[0]
        os.write(1, b"a\n")
        pump.say(b"LINE\n")
        os.write(1, b"b\n")
        pump.say(b"TWO\n")
        os.write(1, b"c\n")
        reads: list[bytes] = []
        kept: list[int] = []
        for most in (4, 3, 2, 4, 100):  # a\nLI | NE\n | b\n | TWO\n | c\n
            seen, on_data = recorder()
            tail.read(on_data, most)
            reads.append(joined(seen, "stdout"))
            kept.append(len(tail.ours))
        pump.close()
        return reads, kept

    reads, kept = in_child(lambda: case(str(tmp_path / "log")))
    assert reads == [b"a\n", b"", b"b\n", b"", b"c\n"]
    # where our lines landed is forgotten once read past: a long run's lines are not kept
    assert kept == [2, 1, 1, 0, 0]


def test_a_read_back_takes_a_megabyte_at_most_and_says_whether_it_found_any(tmp_path):
    def case(path: str) -> dict[str, object]:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        seen, on_data = recorder()
        pump = Pump(on_data)
        tail = pump.tails[0]
        os.write(1, b"x" * (3 * MB))
        pump.tail()
        got: dict[str, object] = {"first": [len(d) for _, d in seen]}
        got["more"] = tail.read(on_data)
        got["again"] = tail.read(on_data)
        got["rest"] = tail.read(on_data)
        got["none"] = tail.read(on_data)
        got["total"] = sum(len(d) for _, d in seen)
        pump.close()
        got["closed"] = tail.read(on_data)  # its descriptor closed: nothing, no error
        return got

    got = in_child(lambda: case(str(tmp_path / "log")))
    assert got["first"] == [MB]
    assert (got["more"], got["again"], got["rest"], got["none"]) == (True, True, False, False)
    assert got["total"] == 3 * MB and got["closed"] is False


def test_two_files_are_read_back_each_under_its_name(tmp_path):
    def case(d: str) -> Seen:
        for fd, name in ((1, "out"), (2, "err")):
            f = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            os.dup2(f, fd)
            os.close(f)
        seen, on_data = recorder()
        pump = Pump(on_data)
        pid = start(pump, "echo o; echo e >&2")
        wait_status(pid)
        pump.drain()
        pump.close()
        return sorted(seen)

    assert in_child(lambda: case(str(tmp_path))) == [("stderr", b"e\n"), ("stdout", b"o\n")]


def test_a_file_beside_dev_null_takes_no_line_of_ours(tmp_path):
    """`>log 2>/dev/null`: our lines are stderr's, which no stream takes; the caller writes
    them (to /dev/null), and the file's watch reads the workload's bytes whole."""
    def case(path: str) -> dict[str, object]:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        os.close(fd)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)
        seen, on_data = recorder()
        pump = Pump(on_data)
        pid = start(pump, "echo abcdef")
        wait_status(pid)
        got: dict[str, object] = {"said": pump.say(b"launcher: x\n")}
        pump.drain()
        pump.close()
        got["seen"] = seen
        return got

    got = in_child(lambda: case(str(tmp_path / "log")))
    assert got == {"said": False, "seen": [("stdout", b"abcdef\n")]}


# --- terminals ------------------------------------------------------------------------------


def winsize(fd: int) -> tuple[int, int]:
    rows, cols, _, _ = struct.unpack("HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))
    return rows, cols


def set_winsize(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def terminal_on(*fds: int, echo: bool = False) -> int:
    """A pseudo-terminal whose slave is each of `fds` now (a user's terminal, 33 rows of
    101, echo off unless `echo`); its master."""
    master, slave = os.openpty()
    set_winsize(slave, 33, 101)
    if not echo:
        attrs = termios.tcgetattr(slave)
        attrs[3] &= ~termios.ECHO
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
    for fd in fds:
        os.dup2(slave, fd)
    os.close(slave)
    return master


def test_a_terminal_stays_a_terminal_of_the_same_settings_and_size():
    """stdout and stderr one terminal: the workload gets a pseudo-terminal of its settings
    (but for output processing: the real one adds the CRs, once) and size, resized with it;
    one stream, named stdout; no console outside PID 1."""
    def case() -> dict[str, object]:
        master = terminal_on(1, 2)
        real = termios.tcgetattr(1)
        before = open_fds()
        seen, on_data = recorder()
        pump = Pump(on_data)
        inner = pump.child[1]
        want = [*real[:1], real[1] & ~termios.OPOST, *real[2:]]
        got: dict[str, object] = {
            "one": pump.child[2] == inner and os.isatty(inner),
            "settings": termios.tcgetattr(inner) == want,
            "size": winsize(inner), "real_size": winsize(1),
            "console": pump.console(),
        }
        set_winsize(1, 40, 120)  # the user resizes the window (SIGWINCH)
        pump.resize()
        got["resized"], got["real_resized"] = winsize(inner), winsize(1)
        pid = start(pump, "printf 'a\\nb\\n'; printf 'e\\n' >&2")
        got["status"] = wait_status(pid)
        pump.drain()  # to the terminal's end (EIO: its last holder is gone)
        got["said"] = pump.say(b"launcher: done\n")
        pump.close()
        got["screen"] = drain_nonblocking(master)
        got["seen"], got["left"] = seen, sorted(open_fds() - before)
        return got

    got = in_child(case)
    assert got["one"] is True and got["settings"] is True and got["console"] is None
    assert got["size"] == got["real_size"] == (33, 101)
    assert got["resized"] == got["real_resized"] == (40, 120)
    assert got["status"] == 0 and got["said"] is True
    assert got["screen"] == b"a\r\nb\r\ne\r\nlauncher: done\r\n"  # one CR before each LF
    assert joined(got["seen"], "stdout") == b"a\nb\ne\n"  # type: ignore[arg-type]
    assert {n for n, _ in got["seen"]} == {"stdout"}  # type: ignore[union-attr]
    assert got["left"] == []


def test_follow_gives_the_workloads_terminal_a_size_changed_without_sigwinch():
    """A terminal resized where no SIGWINCH reaches the supervisor (the foreground's, the
    workload's): follow() gives the workload's pseudo-terminal the new size, and says so once;
    pipes have nothing to follow."""
    def case() -> dict[str, object]:
        terminal_on(1)
        pipe_on(2)
        pump = Pump(lambda *_: None)
        inner = pump.child[1]
        got: dict[str, object] = {"same": pump.follow()}
        set_winsize(1, 50, 132)
        got["changed"] = pump.follow()
        got["size"], got["real"] = winsize(inner), winsize(1)
        got["again"] = pump.follow()
        pump.close()
        return got

    got = in_child(case)
    assert got == {"same": False, "changed": True, "size": (50, 132), "real": (50, 132),
                   "again": False}


def test_stdout_piped_and_stderr_at_the_terminal_are_two_streams():
    """`launcher run -- cmd | less`: stdout a pipe, stderr the terminal, its stream named
    stderr and taking our lines."""
    def case() -> dict[str, object]:
        out = pipe_on(1)
        master = terminal_on(2)
        seen, on_data = recorder()
        pump = Pump(on_data)
        got: dict[str, object] = {"tty": [os.isatty(pump.child[fd]) for fd in (1, 2)]}
        pid = start(pump, "echo o; echo e >&2")
        wait_status(pid)
        pump.drain()
        got["said"] = pump.say(b"launcher: done\n")
        pump.close()
        got["out"], got["screen"] = drain_nonblocking(out), drain_nonblocking(master)
        got["seen"] = sorted(seen)
        return got

    got = in_child(case)
    assert got["tty"] == [False, True] and got["said"] is True
    assert got["out"] == b"o\n" and got["screen"] == b"e\r\nlauncher: done\r\n"
    assert got["seen"] == [("stderr", b"e\n"), ("stdout", b"o\n")]


# --- PID 1 with a terminal: the console ----------------------------------------------------

CLONE_NEWPID = 0x20000000


def as_pid1(fn: Callable[[], T]) -> T | tuple[str, str]:
    """fn() as PID 1 of a PID namespace of its own (a container's init, `docker run -t`), in a
    child of this child; ("unshare", why) where no such namespace can be made."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWPID) != 0:
        return ("unshare", os.strerror(ctypes.get_errno()))
    return in_child(fn)


def pid1(fn: Callable[[], T]) -> T:
    got = in_child(lambda: as_pid1(fn))
    if isinstance(got, tuple) and got[:1] == ("unshare",):
        need("a PID namespace of its own (root)", got[1])
    return got  # type: ignore[return-value]


def relay_until_exit(pump: Pump, pid: int, master: int) -> tuple[int, bytes]:
    """The supervisor's loop, short: the pump's streams relayed until the workload ends;
    its status and what the terminal showed meanwhile."""
    screen = b""
    os.set_blocking(master, False)
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status, screen
        r, w, _ = select.select([*pump.readable(), master], pump.writable(), [], 0.2)
        pump.ready(r, w)
        if master in r:
            screen += drain_nonblocking(master)


def test_pid1_at_a_terminal_hands_the_workload_a_console_of_its_own():
    """`docker run -it`: the workload's pseudo-terminal is its controlling terminal, cooked as
    the container's was, while the container's goes raw and what is typed there is relayed to
    it (not to the watch); our lines add their own CRs; the raw mode ends with the run."""
    def case() -> dict[str, object]:
        os.setsid()
        master = terminal_on(0, 1, 2, echo=True)
        cooked = termios.tcgetattr(0)
        seen, on_data = recorder()
        pump = Pump(on_data)
        console = pump.console()
        inner = pump.child[1]
        got: dict[str, object] = {
            "console": console == os.ttyname(inner),
            "inner_cooked": termios.tcgetattr(inner) == cooked,
            "raw": termios.tcgetattr(0)[3] & (termios.ICANON | termios.ECHO) == 0,
        }
        pid = spawn(["sh", "-c", 'read line; echo "got $line"'], dict(os.environ), [], set(),
                    lambda _: None, console=console)
        pump.spawned()
        os.write(master, b"hi\r")  # typed: a raw terminal passes the CR as it is
        status, screen = relay_until_exit(pump, pid, master)
        pump.drain()  # what is typed now is nobody's: not waited for
        got["status"] = status
        got["said"] = pump.say(b"launcher: done\nsecond line\n")
        pump.close()
        got["screen"] = screen + drain_nonblocking(master)
        got["cooked_again"] = termios.tcgetattr(0) == cooked
        got["stdin_open"] = 0 in open_fds()
        got["names"] = sorted({n for n, _ in seen})
        got["saved"] = pump.saved_mode
        return got

    got = pid1(case)
    assert got["console"] is True and got["inner_cooked"] is True and got["raw"] is True
    assert got["status"] == 0 and got["said"] is True
    # the workload's echo of the typed line, its answer, then ours with CRs of our own
    assert got["screen"] == b"hi\r\ngot hi\r\nlauncher: done\r\nsecond line\r\n", got["screen"]
    assert got["cooked_again"] is True and got["stdin_open"] is True
    assert got["names"] == ["stdout"] and got["saved"] is None


@pytest.mark.parametrize("setup", ["stderr_to_a_file", "stdin_another_terminal",
                                   "stdin_not_a_terminal"])
def test_pid1_console_where_only_some_fds_are_the_terminal(setup, tmp_path):
    """The console needs PID 1, stdin a terminal and stdout one: stderr may go elsewhere; the
    mode saved and made raw is stdin's, set on the workload's terminal and given back to stdin
    at the end; without a terminal on stdin there is no console."""
    log = str(tmp_path / "log")

    def case() -> dict[str, object]:
        os.setsid()
        terminal_on(1, 2)  # stdout's: echo off
        if setup == "stderr_to_a_file":
            fd = os.open(log, os.O_WRONLY | os.O_CREAT)
            os.dup2(fd, 2)
            os.close(fd)
        if setup == "stdin_not_a_terminal":
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
        else:
            master, slave = os.openpty()  # stdin's own terminal: echo on
            os.dup2(slave if setup == "stdin_another_terminal" else 1, 0)
            os.close(slave)
        stdin_mode, stdout_mode = termios.tcgetattr(0) if os.isatty(0) else None, \
            termios.tcgetattr(1)
        pump = Pump(lambda *_: None)
        console = pump.console()
        got: dict[str, object] = {"console": console}
        if console is not None:
            got["is_stdouts"] = console == os.ttyname(pump.child[1])
            got["inner"] = termios.tcgetattr(pump.child[1]) == stdin_mode
            got["stdin_raw"] = termios.tcgetattr(0)[3] & termios.ICANON == 0
        got["stdout_kept"] = termios.tcgetattr(1) == stdout_mode
        pump.close()
        got["stdin_open"] = 0 in open_fds()  # the typing's stream ends; stdin is not ours
        got["stdin_back"] = stdin_mode is None or termios.tcgetattr(0) == stdin_mode
        got["stdout_back"] = termios.tcgetattr(1) == stdout_mode
        return got

    got = pid1(case)
    if setup == "stdin_not_a_terminal":
        assert got == {"console": None, "stdout_kept": True, "stdin_open": True,
                       "stdin_back": True, "stdout_back": True}
        return
    assert got["console"] is not None and got["is_stdouts"] is True
    assert got["inner"] is True and got["stdin_raw"] is True
    assert got["stdin_back"] is True and got["stdout_back"] is True
    assert got["stdin_open"] is True
    # stdout's own terminal is left as it is; one terminal for both is raw while it runs
    assert got["stdout_kept"] is (setup == "stdin_another_terminal")


def test_pid1_whose_terminal_hangs_up_stops_reading_it_and_keeps_stdin():
    """The container's terminal goes away (its master closed): what is typed ends (EIO read
    as the end), and stdin stays open, launcher's own."""
    def case() -> dict[str, object]:
        os.setsid()
        master = terminal_on(0, 1, 2, echo=True)
        pump = Pump(lambda *_: None)
        got: dict[str, object] = {"console": pump.console() is not None,
                                  "typing": 0 in pump.readable()}
        os.close(master)  # hung up
        pump.ready([0], [])
        got["typing_after"] = 0 in pump.readable()
        got["stdin_open"] = 0 in open_fds()
        pump.close()
        got["still_open"] = 0 in open_fds()
        return got

    assert pid1(case) == {"console": True, "typing": True, "typing_after": False,
                          "stdin_open": True, "still_open": True}
