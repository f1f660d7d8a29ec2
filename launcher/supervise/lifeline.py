"""Nothing outlives launcher: the supervisor notices that the launcher that started it is gone
and stops the whole workload tree. Standard library only.

`launcher run` keeps a pipe to the supervisor open (an inherited descriptor natively, named
by contract.LIFELINE, so that the workload gets the caller's stdin; an attached stdin with
StdinOnce in Docker, which the daemon closes when launcher's connection drops, kill -9
included). End of file on stdin means launcher is gone. (PR_SET_PDEATHSIG would not do: it
fires when the thread that started the child ends, while launcher's other threads live on.)
The supervisor is a child subreaper, so every descendant of the workload stays below it and
can be found and stopped.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable

from launcher.cgroups.leaf import LEAF
from launcher.proctree import descendants, is_init

PR_SET_CHILD_SUBREAPER = 36
# launcher's words on the supervisor's stdin (a line each): a reader of a stream went away
READER_GONE = {b"closed stdout": "stdout", b"closed stderr": "stderr"}
GRACE_S = 3.0  # between SIGTERM and SIGKILL


def become_subreaper() -> None:
    """Orphaned descendants come to this process (a container's PID 1 is their reaper
    already: no ctypes to load at its every start)."""
    if is_init():
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def signal_tree(sig: int) -> list[int]:
    """Send `sig` to every descendant of this process; return those signalled."""
    pids = descendants(os.getpid())
    for p in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, sig)
    return pids


def stop_tree(grace: float = GRACE_S, reap: bool = False) -> None:
    """SIGTERM every descendant, then SIGKILL whatever is left after `grace` seconds. `reap`:
    collect exited children here (when no other thread waits for them)."""
    if not signal_tree(signal.SIGTERM):
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if reap:
            _reap()
        if not descendants(os.getpid()):
            return
        time.sleep(0.05)
    signal_tree(signal.SIGKILL)
    if reap:
        while descendants(os.getpid()) and time.monotonic() < deadline + grace:
            _reap()
            time.sleep(0.02)


def _reap(pid: int = 0) -> int | None:
    """Collect every exited child; the wait status of `pid` if it was among them."""
    found = None
    with contextlib.suppress(ChildProcessError):
        while True:
            done, status = os.waitpid(-1, os.WNOHANG)
            if done <= 0:
                break
            if done == pid:
                found = status
    return found


class Lifeline:
    """A dispatcher of the loop (loop.Loop): launcher's end of a pipe (`fd`: the supervisor's
    stdin in a container, an inherited descriptor natively). Its end of file means launcher is
    gone: the whole tree is stopped and the loop ends. A line on it from launcher (`closed
    stdout`) says that a reader of the relayed output went away."""

    def __init__(self, fd: int, on_gone: Callable[[], None],
                 on_reader_gone: Callable[[str], None]) -> None:
        self.fd, self.on_gone, self.on_reader_gone = fd, on_gone, on_reader_gone
        self.heard = b""  # the start of a line from launcher, its end in a later read
        self.open = True
        if fd > 2:  # the workload never gets it
            os.set_inheritable(fd, False)
        # a FIFO opened after its writer never polls as hung up when that writer goes (Linux
        # reports POLLHUP only for a writer newer than the reader): read at each turn instead
        import stat

        self.fifo = stat.S_ISFIFO(os.fstat(fd).st_mode) and fd > 2 and _named(fd)

    def readable(self) -> list[int]:
        return [self.fd] if self.open else []

    def writable(self) -> list[int]:
        return []

    def ready(self, readable: list[int], _writable: list[int]) -> None:
        if self.fd not in readable and not (self.fifo and self.open):
            return
        said = _read(self.fd)
        if said is None:
            self.open = False
            stop_tree(reap=True)
            self.on_gone()
            return
        *words, self.heard = (self.heard + said).split(b"\n")
        for word in words:
            if word in READER_GONE:
                self.on_reader_gone(READER_GONE[word])


def _named(fd: int) -> bool:
    """A FIFO with a name (not an anonymous pipe)."""
    try:
        return not os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:")
    except OSError:
        return False


def _read(fd: int) -> bytes | None:
    """What launcher wrote; None at end of file (or when unreadable: launcher is gone)."""
    try:
        return os.read(fd, 4096) or None
    except BlockingIOError:
        return b""
    except OSError:
        return None


def enter(env: dict[str, str], cgroups: list[str]) -> str | None:
    """The run's cgroups (a native run's, or the entrypoint's own in a container), a native
    run's CPUs and rlimits, taken by the supervisor itself before the workload starts
    (launcher starts it without a pre-exec hook: that is not safe in a process with threads).
    Returns what could not be done, or None."""
    import resource

    from launcher import contract as c

    for d in cgroups:
        try:
            _move_into(d)
        except OSError as exc:
            return f"cannot join the run's cgroup {d}: {exc.strerror}"
    cpus = env.get(c.CPUSET)
    if cpus:
        try:
            from launcher.cpulist import cpu_ids

            os.sched_setaffinity(0, cpu_ids(cpus))
        except (OSError, ValueError) as exc:
            return f"cannot run on CPUs {cpus}: {getattr(exc, 'strerror', None) or exc}"
    for name, (soft, hard) in c.decode_rlimits(env.get(c.RLIMITS, "")).items():
        res = getattr(resource, f"RLIMIT_{name.upper()}", None)
        if res is None:
            continue
        inf = resource.RLIM_INFINITY
        try:
            resource.setrlimit(res, (inf if soft < 0 else soft, inf if hard < 0 else hard))
        except (OSError, ValueError) as exc:
            return f"cannot set the {name} limit to {soft}/{hard}: {exc}"
    return None


def leave_v1_memory(dirs: list[str]) -> list[str]:
    """Move this process out of the run's cgroup v1 memory directory, into its parent (the
    caller's, where it came from), once the workload has started inside: the memory limit's
    OOM kills then choose among the workload's processes only. For a supervisor that cannot
    take itself out of the OOM killer's choice (spawn.spare_from_oom). Its pages charged
    there stay charged (v1 moves no charge by default); cgroup v2 moves every controller at
    once, and is left alone. Returns the directories left (`join` them again, the workload
    ended, for the kernel's counters read from this process's own cgroups)."""
    left = []
    for d in dirs:
        if os.path.exists(os.path.join(d, "memory.limit_in_bytes")):
            try:
                _move_into(os.path.dirname(d))
                left.append(d)
            except OSError:
                pass
    return left


def join(dirs: list[str]) -> None:
    """This process back into `dirs` (leave_v1_memory's)."""
    for d in dirs:
        with contextlib.suppress(OSError):
            _move_into(d)


def _move_into(d: str) -> None:
    """This process into cgroup directory `d` (OSError where it may not go)."""
    with open(os.path.join(d, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))


def leave_cgroups(dirs: list[str]) -> None:
    """Move this process out of each of the run's cgroup directories and remove them (the
    launcher that would have is gone): into the parent, or where a v2 parent may hold no
    process, into launcher's leaf beside the run or the nearest ancestor that takes it."""
    for d in dirs:
        for home in _homes(d):
            try:
                _move_into(home)
                break
            except OSError:
                continue
        for _ in range(50):  # the last task may take a moment to leave
            try:
                os.rmdir(d)
                break  # removed
            except FileNotFoundError:
                break  # removed already
            except OSError:
                time.sleep(0.05)


def _homes(d: str) -> list[str]:
    parent = os.path.dirname(d)
    out = [parent, os.path.join(parent, LEAF)]
    up = os.path.dirname(parent)
    while up != parent and os.path.exists(os.path.join(up, "cgroup.procs")):
        out.append(up)
        parent, up = up, os.path.dirname(up)
    return out
