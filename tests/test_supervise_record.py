"""launcher/supervise/record.py: the exit file's facts of how the workload ended (a memory
limit's kill told from the counters, its peaks, its largest resident size) and the limits it
started under, as the exit file and `launcher` read them."""

from __future__ import annotations

import os
import resource
from pathlib import Path

from launcher.supervise.diagnose import KernelCounters
from launcher.supervise.evidence import Peaks, Start
from launcher.supervise.record import at_start, exit_record
from tests.supervised import exit_record as exit_file
from tests.supervised import supervise

MiB = 1 << 20


def counters(oom_kills: int | None = None, **more: int | None) -> KernelCounters:
    k = KernelCounters()
    k.oom_kills = oom_kills
    for name, value in more.items():
        setattr(k, name, value)
    return k


def test_an_oom_kill_is_one_the_counters_gained_during_the_run():
    cases = {(None, None): False, (None, 0): False, (0, 0): False, (None, 1): True,
             (0, 1): True, (1, 1): False, (2, 3): True, (3, None): False, (1, 0): False}
    for (before, after), oom in cases.items():
        rec = exit_record(0, "s", counters(before), counters(after))
        assert rec["oom"] is oom, (before, after)


def test_the_exit_records_fields():
    import subprocess
    import sys

    subprocess.run([sys.executable, "-c", "pass"], check=True)  # a child waited for: its size
    after = counters(None, memory_peak=300 * MiB, pids_peak_nearest=12, pids_peak=40)
    rec = exit_record(137, "the workload was killed.", counters(), after)
    assert {k: v for k, v in rec.items() if k != "maxrss"} == {
        "status": 137, "diagnosis": "the workload was killed.", "started": True, "oom": False,
        "memory_peak": 300 * MiB, "pids_peak": 12}  # the nearest pids cgroup's peak
    kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert kib > 0 and rec["maxrss"] == kib * 1024  # bytes


def test_a_workloads_largest_resident_size_in_bytes(tmp_path):
    proc = supervise(tmp_path, "b = bytearray(96 << 20); b[::4096] = b'x' * len(b[::4096])")
    assert proc.returncode == 0, proc.stderr
    maxrss = exit_file(tmp_path)["maxrss"]
    assert 96 * MiB <= maxrss < 4096 * MiB, maxrss


def test_the_limits_it_started_under_and_what_the_samples_saw():
    start = Start({})
    start.nproc, start.exempt, start.uid, start.outside = 500, False, 1000, 3
    start.address_space, start.data, start.stack, start.threads_max = 1 << 34, 1 << 33, 8 * MiB, 999
    after = counters(None, pids_max=64, pids_peak_nearest=20)
    peaks = Peaks(os.getpid())
    peaks.threads, peaks.vm_size, peaks.vm_data = 17, 5 << 30, 3 << 30
    assert at_start(start, after, peaks) == {
        "nproc": 500, "nproc_exempt": False, "uid": 1000, "uid_tasks_outside": 3,
        "address_space": 1 << 34, "data": 1 << 33, "stack": 8 * MiB, "threads_max": 999,
        "pids_max": 64, "threads_seen": 17, "tasks_peak": 20, "vm_size_seen": 5 << 30,
        "vm_data_seen": 3 << 30}


def test_the_exit_file_carries_the_limits_at_start(tmp_path):
    proc = supervise(tmp_path, "pass")
    assert proc.returncode == 0, proc.stderr
    limits = exit_file(tmp_path)["limits_at_start"]
    assert limits["uid"] == os.getuid()
    assert limits["threads_max"] == int(Path("/proc/sys/kernel/threads-max").read_text())
    assert limits["threads_seen"] >= 0 and limits["vm_size_seen"] >= 0
