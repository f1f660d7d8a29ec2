"""The pieces behind the stack check and the thread-failure evidence, unit by unit: glibc's and
libgomp's stack sizes, what threads reserve of RLIMIT_AS and RLIMIT_DATA, and what the
supervisor reads and samples (against live processes under real rlimits)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from launcher.caps.stacks import (
    Stacks,
    default_stack,
    fits,
    omp_stack,
    stack_reasons,
    stacks_of,
)
from launcher.frameworks import get
from launcher.supervise.evidence import Peaks, loadavg, uid_tasks
from tests.conftest import ROOT

MIB = 1 << 20


def test_glibcs_default_stack():
    assert default_stack(None) == default_stack(-1) == 2 * MIB  # unlimited
    assert default_stack(8 * MIB) == 8 * MIB
    assert default_stack(0) == default_stack(100) == 16384  # PTHREAD_STACK_MIN


@pytest.mark.parametrize(("env", "size"), [
    ({}, None), ({"GOMP_STACKSIZE": "512"}, 512 << 10), ({"OMP_STACKSIZE": "512k"}, 512 << 10),
    ({"OMP_STACKSIZE": "4M"}, 4 * MIB), ({"OMP_STACKSIZE": "1g"}, 1 << 30),
    ({"OMP_STACKSIZE": "100B"}, 100), ({"OMP_STACKSIZE": "2 m"}, 2 * MIB),
    ({"GOMP_STACKSIZE": "256", "OMP_STACKSIZE": "4M"}, 256 << 10),
    ({"OMP_STACKSIZE": "lots"}, None), ({"GOMP_STACKSIZE": "x", "OMP_STACKSIZE": "8k"}, 8 << 10)])
def test_libgomps_stack_from_its_variables(env, size):
    assert omp_stack(env) == size


def test_what_threads_reserve():
    s = Stacks(threads=11, stack=8 * MIB, omp_threads=4, omp=512 << 10, arenas=3)
    per, omp = 8 * MIB + 4096, (512 << 10) + 4096
    assert s.reserved == 6 * per + 4 * omp  # the main thread's own stack is not a thread's
    assert s.address_space == s.reserved + 3 * (64 * MIB)
    assert s.describe() == "6 thread stacks x 8MiB + 4 OpenMP x 512KiB = 50.0MiB"
    assert s.describe(arenas=True) == ("6 thread stacks x 8MiB + 4 OpenMP x 512KiB + 3 malloc "
                                       "arenas x 64MiB = 242MiB")
    plain = Stacks(threads=3, stack=MIB, omp_threads=1, omp=None)
    assert plain.reserved == 2 * (MIB + 4096) and plain.address_space == plain.reserved
    assert plain.describe(arenas=True) == "2 thread stacks x 1MiB = 2.0MiB"
    assert Stacks(threads=1, stack=MIB, omp_threads=0, omp=None).reserved == 0


def test_stacks_of_counts_omp_workers_and_arenas():
    parts = {"main": 1, "torch_intra_op": 3, "openblas": 3}
    s = stacks_of(7, parts, None, {}, cpus=2, omp_parts=get("torch").omp_parts)
    assert (s.threads, s.stack, s.omp_threads, s.omp) == (7, 2 * MIB, 3, None)
    assert stacks_of(7, parts, None, {}, cpus=2, omp_parts=get("tf").omp_parts).omp_threads == 0
    assert s.arenas == 6  # min(threads - 1, 8 x CPUs - 1)
    assert stacks_of(40, parts, 8 * MIB, {}, cpus=2).arenas == 15
    assert stacks_of(40, parts, 8 * MIB, {"MALLOC_ARENA_MAX": "2"}, cpus=2).arenas == 1
    assert stacks_of(40, parts, 8 * MIB, {"MALLOC_ARENA_MAX": "x"}, cpus=1).arenas == 7
    assert stacks_of(1, {}, None, {}, cpus=4).arenas == 0
    assert stacks_of(5, parts, None, {"OMP_STACKSIZE": "1M"}, cpus=1).omp == MIB


def test_stack_reasons_at_their_boundaries():
    s = Stacks(threads=5, stack=MIB, omp_threads=0, omp=None, arenas=1)
    r, a = s.reserved, s.address_space
    assert stack_reasons(s, {"as": None, "data": -1}) == []
    assert stack_reasons(s, {"data": 2 * r}) == [] and fits(s, {"data": 2 * r})
    (level, said), = stack_reasons(s, {"data": 2 * r - 1})
    assert level == "warn" and not fits(s, {"data": 2 * r - 1})
    assert said == (f"4 thread stacks x 1MiB = 4.0MiB take {r * 100 // (2 * r - 1)}% of "
                    f"RLIMIT_DATA 8.0MiB, and the interpreter and its libraries need address "
                    f"space too; lower limits.stack (glibc's default stack) or "
                    f"threads.omp_stack, or the pools.")
    assert stack_reasons(s, {"data": r})[0][0] == "warn"
    (level, said), = stack_reasons(s, {"data": r - 1})
    assert level == "refuse" and said.startswith("4 thread stacks x 1MiB = 4.0MiB exceed "
                                                 "RLIMIT_DATA 4.0MiB: thread creation fails")
    (level, said), = stack_reasons(s, {"as": a - 1})
    assert level == "refuse" and "+ 1 malloc arenas x 64MiB" in said
    assert said.endswith(", or set MALLOC_ARENA_MAX=2.")
    assert fits(s, {"as": 2 * a}) and not fits(s, {"as": 2 * a - 1})
    assert fits(s, {"as": 0}) and fits(s, {"as": None})


# -- the supervisor's evidence, from live processes ----------------------------------------

HOLD = ("import threading, time, subprocess, sys\n"
        "[threading.Thread(target=time.sleep, args=(30,), daemon=True).start() for _ in range(4)]\n"
        "child = subprocess.Popen(['sleep', '30'])\n"
        "print('ready', flush=True)\n"
        "time.sleep(30)\n")


def _status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def test_watch_samples_the_workload_and_its_children():
    proc = subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        w = Peaks(proc.pid)
        assert (w.threads, w.vm_size, w.samples) == (0, 0, 0)
        assert w.sample() == 0.01
        st = _status(proc.pid)
        assert w.threads >= int(st["Threads"]) + 1  # + the child sleep
        assert w.vm_size >= int(st["VmSize"].split()[0]) * 1024 > 0
        assert w.vm_data >= int(st["VmData"].split()[0]) * 1024 > 0
        # the last PID given is at or after the child's, counted round pid_max (PIDs wrap)
        assert w.host_tasks >= w.threads and w.samples == 1
        assert _pid_distance(proc.pid, w.last_pid) < _PID_MAX // 2
        peak, vm = w.threads, w.vm_size
        small = subprocess.Popen(["sleep", "30"])
        try:
            w.pid = small.pid  # a smaller process now: the peaks stay
            w.sample()
            assert (w.threads, w.vm_size, w.samples) == (peak, vm, 2)
        finally:
            small.kill()
            small.wait()
    finally:
        proc.kill()
        proc.wait()


def test_watch_samples_often_first_then_seldom():
    w = Peaks(os.getpid())
    for age, interval in ((0, 0.01), (1.99, 0.01), (2.01, 0.05), (9.99, 0.05), (10.01, 0.25)):
        w.started = time.monotonic() - age
        assert w.interval() == interval


_PID_MAX = int(open("/proc/sys/kernel/pid_max").read())  # noqa: SIM115


def _pid_distance(earlier: int, later: int) -> int:
    """How many PIDs were given from `earlier` to `later`, round pid_max: a busy host wraps
    (32761 then 161), so a later PID may be a smaller number."""
    return (later - earlier) % _PID_MAX


def test_pid_distance_counts_round_the_wrap():
    assert _pid_distance(32761, 32761 + 5) == 5
    assert _pid_distance(_PID_MAX - 7, 161) == 168
    assert _pid_distance(200, 100) > _PID_MAX // 2  # earlier, not later


def test_loadavg_and_the_uids_tasks():
    tasks, last_pid = loadavg()
    with open("/proc/loadavg") as f:
        fields = f.read().split()
    assert abs(tasks - int(fields[3].split("/")[1])) < 50 and tasks > 0
    assert last_pid > 0 and _pid_distance(last_pid, int(fields[4])) < 1000
    import psutil

    def psutils_count() -> int:
        return sum(p.info["num_threads"] or 0
                   for p in psutil.process_iter(["uids", "num_threads"])
                   if p.info["uids"] and p.info["uids"].real == os.getuid())

    # the UID's threads come and go (other tests run beside this one): a few tries at a calm
    # moment, each bracketed by two readings of uid_tasks
    tries = [(uid_tasks(os.getuid()), psutils_count(), uid_tasks(os.getuid())) for _ in range(5)]
    assert any(min(a, b) - 20 < mine < max(a, b) + 20 for a, mine, b in tries), tries
    assert uid_tasks(os.getuid()) > 0
    assert uid_tasks(2_000_000_000) == 0


def test_start_reads_the_limits_the_workload_starts_under(tmp_path):
    code = ("import json; from launcher.supervise.evidence import Start; s = Start({}); "
            "print(json.dumps(vars(s)))")

    def start(*limits: str) -> dict:  # type: ignore[type-arg]
        out = subprocess.run(["prlimit", *limits, sys.executable, "-c", code], check=True,
                             capture_output=True, text=True, env={**os.environ,
                                                                  "PYTHONPATH": str(ROOT)})
        return json.loads(out.stdout)  # type: ignore[no-any-return]

    s = start("--nproc=70:70", "--as=4000000000", "--data=3000000000", "--stack=1048576")
    assert (s["nproc"], s["address_space"], s["data"], s["stack"]) == (
        70, 4000000000, 3000000000, MIB)
    assert s["uid"] == os.getuid() and s["tasks_before"] > 0
    with open("/proc/sys/kernel/threads-max") as f:
        assert s["threads_max"] == int(f.read())
    with open("/proc/sys/kernel/pid_max") as f:
        assert s["pid_max"] == int(f.read())
    if s["exempt"]:  # root: the UID's tasks are never walked
        assert s["outside"] == 0
    else:
        assert s["outside"] >= 0
    s = start("--as=unlimited", "--data=unlimited", "--stack=unlimited")
    assert (s["address_space"], s["data"], s["stack"]) == (None, None, 2 * MIB)
