"""Sample a process tree and its cgroup: threads, pids, memory maps, RSS, against their limits.

The tree, its threads and RSS come from psutil; `benchmarks/telemetry.py` measures the cost of a
sample.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from launcher.probe.cgroup import read_int_or_none

KEYS = ("t", "threads", "pids_current", "pids_max", "maps", "max_map_count", "rss_bytes",
        "memory_limit_bytes")
LIMIT_OF = {"threads": "pids_max", "pids_current": "pids_max", "maps": "max_map_count",
            "rss_bytes": "memory_limit_bytes"}
# the series and limits in words, for warnings
WORDS = {"threads": "threads", "pids_current": "pids.current", "maps": "memory maps",
         "rss_bytes": "RSS", "pids_max": "pids.max", "max_map_count": "vm.max_map_count",
         "memory_limit_bytes": "the memory limit"}


def tree(pid: int) -> list[Any]:
    """The process and its descendants (psutil, imported here: in the sampler's thread, off
    the run's start); [] once it is gone."""
    import psutil

    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def sample_tree(pid: int) -> tuple[int, int, int]:
    """(threads, largest map count of one process, total RSS in bytes) of the tree."""
    import psutil

    threads = maps = rss = 0
    for p in tree(pid):
        try:
            with p.oneshot():
                threads += p.num_threads()
                rss += p.memory_info().rss
            maps = max(maps, _map_count(p.pid))
        except psutil.Error:
            continue  # exited while we looked
    return threads, maps, rss


def _map_count(pid: int) -> int:
    """Lines of /proc/PID/maps (psutil's memory_maps parses smaps: ~100x the cost)."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            return f.read().count(b"\n")
    except OSError:
        return 0


class Sampler(threading.Thread):
    """Samples every `interval` seconds into a JSON-lines file until stopped."""

    def __init__(self, pid: int, out: IO[str], limits: dict[str, int | None], *,
                 pids_dir: Path | None = None, interval: float = 1.0,
                 warn: Callable[[str], None] | None = None) -> None:
        super().__init__(daemon=True, name="launcher-telemetry")
        self.pid, self.out, self.limits = pid, out, limits
        self.pids_dir, self.interval, self.warn = pids_dir, interval, warn
        self.stop_event = threading.Event()
        self.start_time = time.monotonic()
        self.warned: set[str] = set()
        self.samples = 0
        from launcher.telemetry.gpus import GpuSampler

        gpus = GpuSampler()
        self.gpus = gpus if gpus.any else None

    def sample(self) -> dict[str, Any]:
        threads, maps, rss = sample_tree(self.pid)
        pids_current = (read_int_or_none(self.pids_dir / "pids.current") if self.pids_dir
                        else None)
        row = {"t": round(time.monotonic() - self.start_time, 3), "threads": threads,
               "pids_current": pids_current, "pids_max": self.limits.get("pids_max"),
               "maps": maps, "max_map_count": self.limits.get("max_map_count"),
               "rss_bytes": rss, "memory_limit_bytes": self.limits.get("memory_limit_bytes")}
        if self.gpus is not None:  # GPU memory and utilisation, when GPUs exist
            row["gpus"] = self.gpus.sample()
        self.out.write(json.dumps(row) + "\n")
        self.out.flush()
        self.samples += 1
        self._check(row)
        return row

    def _check(self, row: dict[str, Any]) -> None:
        if self.warn is None:
            return
        estimate = self.limits.get("threads_estimate")
        if estimate and row["threads"] > estimate and "estimate" not in self.warned:
            self.warned.add("estimate")
            self.warn(f"threads at {row['threads']} passed the plan's estimate of {estimate}")
        for key, limit_key in LIMIT_OF.items():
            value, limit = row.get(key), row.get(limit_key)
            # one warning per limit: threads and pids.current near pids.max say the same
            if value and limit and value > 0.8 * limit and limit_key not in self.warned:
                self.warned.add(limit_key)
                self.warn(f"{WORDS[key]} at {_shown(key, value)} reached "
                          f"{100 * value // limit}% of {WORDS[limit_key]} "
                          f"{_shown(limit_key, limit)}")

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.sample()
            self.stop_event.wait(self.interval)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=5)


def _shown(key: str, value: int) -> str:
    from launcher.units import format_size

    return format_size(value) if key.endswith("bytes") else f"{value:,}"
