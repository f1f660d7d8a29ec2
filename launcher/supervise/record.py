"""The supervisor's last stage's facts: how the workload ended (contract.write_exit) and the
limits it started under. Standard library only."""

from __future__ import annotations

from launcher.supervise.diagnose import KernelCounters
from launcher.supervise.evidence import Peaks, Start


def exit_record(code: int, sentence: str, before: KernelCounters,
                after: KernelCounters) -> dict[str, object]:
    """How the workload ended (contract.write_exit)."""
    import resource

    return {"status": code, "diagnosis": sentence, "started": True,
            "oom": (after.oom_kills or 0) > (before.oom_kills or 0),
            "memory_peak": after.memory_peak, "pids_peak": after.pids_peak_nearest,
            "maxrss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}


def at_start(start: Start, after: KernelCounters, peaks: Peaks) -> dict[str, object]:
    """The limits the workload started under and what the samples saw of it: for naming a
    thread failure the samples missed (launcher reads the workload's own words for it)."""
    return {"nproc": start.nproc, "nproc_exempt": start.exempt, "uid": start.uid,
            "uid_tasks_outside": start.outside, "address_space": start.address_space,
            "data": start.data, "stack": start.stack, "threads_max": start.threads_max,
            "pids_max": after.pids_max, "threads_seen": peaks.threads,
            # the kernel's own peak of the nearest pids cgroup: at least every task the
            # workload ever had at once (its tree is in it), whatever the samples missed
            "tasks_peak": after.pids_peak_nearest,
            "vm_size_seen": peaks.vm_size, "vm_data_seen": peaks.vm_data}
