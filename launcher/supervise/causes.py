"""The causes of a failed thread creation besides a pids cgroup and the OOM killer, each named
from its evidence with its fix (docs/running.md's table lists them): RLIMIT_NPROC, RLIMIT_AS,
RLIMIT_DATA, kernel.threads-max, kernel.pid_max, a memory limit reached without an OOM kill,
and a seccomp filter refusing clone3; and why a command did not start, in a shell's words."""

from __future__ import annotations

from launcher.glibc import GUARD
from launcher.supervise.evidence import Peaks, Start
from launcher.units import format_size

NEAR = 2  # tasks short of a count limit that still read as reaching it (others come and go)
RESERVED_PIDS = 300  # PIDs below this are not reused after pid_max wraps (kernel/pid.c)


def thread_limit(start: Start, peaks: Peaks, peak: int | None) -> str | None:
    """One clause naming the limit a failed workload hit, with its fix; None when no evidence
    points at one. `peak`: the run's tasks at their peak (the kernel's pids.peak where a run
    cgroup counts them, else the samples')."""
    found = thread_cause(start, peaks, peak)
    return found[1] if found else None


def thread_cause(start: Start, peaks: Peaks, peak: int | None) -> tuple[str, str] | None:
    """(the limit's code: nproc, as, data, threads-max, pid-max, clone3; thread_limit's
    clause), or None."""
    tasks = max(peak or 0, peaks.threads)
    per = start.stack + GUARD
    if start.nproc is not None and not start.exempt and tasks:
        uid = start.outside + tasks
        if uid >= start.nproc - NEAR:
            return "nproc", (
                f"RLIMIT_NPROC {start.nproc} was reached: UID {start.uid} ran ~{uid} tasks "
                f"({tasks} of them the workload's at its peak) and the kernel refuses a "
                f"thread past the soft limit (EAGAIN); raise limits.nproc (ulimit -u) or "
                f"lower the thread caps.")
    for limit, used, word, fix in (
            (start.address_space, peaks.vm_size, "RLIMIT_AS", "ulimit -v"),
            (start.data, peaks.vm_data, "RLIMIT_DATA", "ulimit -d")):
        if limit is None:
            continue
        if used + 2 * per >= limit or tasks * per >= limit // 2:
            shown = (f"{'VmSize' if word == 'RLIMIT_AS' else 'VmData'} reached "
                     f"{format_size(used)} of it" if used else "")
            return word[7:].lower(), (
                f"{word} {format_size(limit)} was reached{': ' + shown if shown else ''} "
                f"with {tasks} threads, each reserving a {format_size(start.stack)} stack "
                f"(glibc maps it whole; thread creation fails with EAGAIN); set "
                f"limits.stack and threads.omp_stack smaller (1MiB, 512k) or raise "
                f"{fix}.")
    host = max(peaks.host_tasks, start.tasks_before + tasks)
    if start.threads_max is not None and host >= start.threads_max - NEAR:
        return "threads-max", (
            f"kernel.threads-max {start.threads_max} was reached: the kernel ran ~{host} "
            f"tasks in all and refuses more (EAGAIN); raise it on the host (sysctl "
            f"kernel.threads-max) or lower the thread caps.")
    # pid_max is per PID namespace (Linux >= 6.14); the task count is the kernel's, every
    # namespace's: at least the namespace's own
    if start.pid_max is not None and host >= start.pid_max - RESERVED_PIDS:
        return "pid-max", (
            f"kernel.pid_max {start.pid_max} was reached: ~{host} tasks ran, each holding a "
            f"PID, and the workload's PID namespace had none left to give (EAGAIN; the "
            f"last it gave was {peaks.last_pid}); raise it (sysctl kernel.pid_max, in that "
            f"namespace) or lower the thread caps.")
    if clone3_refused():
        return "clone3", (
            "a seccomp filter refuses clone3 (a probe of it got EPERM): glibc starts threads "
            "with clone3 and falls back to clone only on ENOSYS, so thread creation fails "
            "(EPERM); use Docker >= 20.10.10 (its profile answers "
            "ENOSYS) or a seccomp profile that allows clone3.")
    return None


def clone3_refused() -> bool:
    """Whether a seccomp filter refuses clone3 to this process (and so to the workload it
    spawned: filters are inherited): clone3 with a size of 0 is EINVAL where it is allowed,
    before anything is created; a filter answers EPERM. Never ENOSYS-filtered: glibc copes."""
    import ctypes
    import errno
    import platform

    nr = {"x86_64": 435, "aarch64": 435}.get(platform.machine())
    if nr is None:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(nr, None, 0) != -1:
        return False
    return ctypes.get_errno() == errno.EPERM


def cannot_run(word: str, exc: OSError) -> str:
    """Why `word` did not start, as bash says it: a directory is one, and a script whose #!
    interpreter is missing names it (its ENOENT is the interpreter's, not the file's)."""
    import errno
    import os
    import shutil

    found = word if "/" in word else shutil.which(word, mode=os.F_OK)  # posix_spawnp's PATH
    if found and os.path.isdir(found):
        return "Is a directory"
    if not found or exc.errno != errno.ENOENT or not os.path.isfile(found):
        return exc.strerror or str(exc)
    try:
        with open(found, "rb") as f:
            head = f.readline(256)
    except OSError:
        return exc.strerror or str(exc)
    if not head.startswith(b"#!"):
        return exc.strerror or str(exc)  # an ELF whose loader is missing, say
    line = head[2:].rstrip(b"\n").lstrip(b" \t")
    name = line.split(b" ")[0].split(b"\t")[0].decode(errors="replace")
    said = name if name.isprintable() else repr(name)
    crlf = "; its #! line ends in a carriage return (Windows line ends)" if "\r" in name else ""
    return f"{said}: bad interpreter: No such file or directory{crlf}"
