"""What the supervisor records to name the cause of a thread failure: the limits the workload
starts under, and samples of it while it runs (its threads, its address space, the kernel's
task count). Standard library only, plain classes: it is imported at every container start."""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path

from launcher.glibc import STACK_UNLIMITED
from launcher.kernel import read_nproc_exempt


def _soft(which: int) -> int | None:
    soft = resource.getrlimit(which)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def _sysctl(name: str) -> int | None:
    try:
        with open(f"/proc/sys/kernel/{name}") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def _status(pid: int | str) -> dict[str, str]:
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                out[key] = value.strip()
    except OSError:
        pass
    return out


def loadavg() -> tuple[int, int]:
    """(every task the kernel runs, threads included; the last PID given out in this PID
    namespace): /proc/loadavg's 4th and 5th fields; zeros where unreadable."""
    try:
        with open("/proc/loadavg") as f:
            fields = f.read().split()
        return int(fields[3].partition("/")[2]), int(fields[4])
    except (OSError, ValueError, IndexError):
        return 0, 0


def uid_tasks(uid: int) -> int:
    """Threads of every process whose real UID is `uid` (what RLIMIT_NPROC counts)."""
    total = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _status(name)
            try:
                if int(st["Uid"].split()[0]) == uid:
                    total += int(st.get("Threads", "1"))
            except (KeyError, ValueError, IndexError):
                continue
    return total


class Start:
    """The limits the workload starts under: the supervisor's own, which a spawned child
    inherits (set by `lifeline.enter` or the entrypoint before the spawn)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.nproc = _soft(resource.RLIMIT_NPROC)
        self.address_space = _soft(resource.RLIMIT_AS)
        self.data = _soft(resource.RLIMIT_DATA)
        stack = _soft(resource.RLIMIT_STACK)
        self.stack = stack if stack is not None else STACK_UNLIMITED  # glibc's default
        self.uid = os.getuid()
        self.exempt = read_nproc_exempt(Path("/"))
        # the UID's tasks outside the run (less the supervisor's own), counted only where the
        # limit binds: a walk of /proc
        self.outside = (uid_tasks(self.uid) - 1 if self.nproc is not None and not self.exempt
                        else 0)
        self.threads_max = _sysctl("threads-max")
        self.pid_max = _sysctl("pid_max")
        self.tasks_before = loadavg()[0]


class Peaks:
    """Peaks sampled while the workload runs: often at first (a pool that fails, fails as it
    starts), then seldom. Reads /proc/PID/status of the workload and its children only."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.started = time.monotonic()
        self.threads = 0  # of the workload's processes together
        self.vm_size = 0  # the largest VmSize of one process
        self.vm_data = 0  # the largest VmData of one process
        self.host_tasks = 0  # the kernel's tasks in all
        self.last_pid = 0  # the highest PID given out in the namespace
        self.samples = 0
        self.watched = False  # the watch samples the run beside this

    def interval(self) -> float:
        """Often while pools start; after 10 s, every 0.25 s, or every second where the watch
        samples the run too (`watched`: its rows hold the later peaks)."""
        age = time.monotonic() - self.started
        return 0.01 if age < 2 else 0.05 if age < 10 else 1.0 if self.watched else 0.25

    def sample(self) -> float:
        """One sample; the seconds until the next."""
        threads = 0
        for pid in self._processes():
            st = _status(pid)
            try:
                threads += int(st.get("Threads", "0"))
                self.vm_size = max(self.vm_size, int(st.get("VmSize", "0 kB").split()[0]) * 1024)
                self.vm_data = max(self.vm_data, int(st.get("VmData", "0 kB").split()[0]) * 1024)
            except (ValueError, IndexError):
                continue
        self.threads = max(self.threads, threads)
        tasks, last_pid = loadavg()
        self.host_tasks = max(self.host_tasks, tasks)
        self.last_pid = max(self.last_pid, last_pid)
        self.samples += 1
        return self.interval()

    def _processes(self) -> list[int]:
        """The workload and its children, three levels deep (a wrapper's child, its child),
        through each main thread's children list: a few reads, whatever its thread count."""
        out, level = [self.pid], [self.pid]
        for _ in range(2):
            nxt = []
            for pid in level:
                try:
                    with open(f"/proc/{pid}/task/{pid}/children") as f:
                        nxt += [int(c) for c in f.read().split()]
                except (OSError, ValueError):
                    continue
            out += nxt
            level = nxt
        return out
