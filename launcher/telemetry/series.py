"""The series a run's growth is watched in, each with the limit it runs into and their words:
one table for the sampler's warnings, the fit and the sentences. Standard library only (the
supervisor's sampler reads it in every image)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Series:
    key: str  # in each telemetry row
    limit_key: str  # the limit it runs into, in each row
    word: str
    limit_word: str
    in_bytes: bool
    min_step: float  # growth per cycle below this is noise, not a leak


SERIES = {s.key: s for s in (
    Series("threads", "pids_max", "threads", "pids.max", False, 0.0),
    Series("memory_bytes", "memory_limit_bytes", "memory", "the memory limit", True, 64 << 10),
    Series("rss_bytes", "memory_limit_bytes", "RSS", "the memory limit", True, 64 << 10),
    Series("vm_size_bytes", "rlimit_as", "VmSize", "RLIMIT_AS", True, 64 << 10),
    Series("vm_data_bytes", "rlimit_data", "VmData", "RLIMIT_DATA", True, 64 << 10),
    Series("maps", "max_map_count", "memory maps", "vm.max_map_count", False, 0.0),
    Series("files", "nofile", "open files", "RLIMIT_NOFILE", False, 0.0),
    Series("processes", "pids_max", "processes", "pids.max", False, 0.0),
)}
