"""Sample a process tree and its cgroup: threads, pids, memory, memory maps, RSS, VmSize,
VmData and open files, against their limits; and a row at each cycle boundary (`mark`), with the
counters at that moment, the kernel's memory peak since the last boundary, and a census of the
threads.

The tree, its threads and RSS come from psutil; `benchmarks/telemetry.py` measures the cost of a
sample.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from launcher.probe.cgroup import read_int_or_none
from launcher.telemetry.series import SERIES

KEYS = ("t", "threads", "processes", "pids_current", "pids_max", "maps", "max_map_count",
        "rss_bytes", "memory_limit_bytes", "vm_size_bytes", "vm_data_bytes", "files", "rlimit_as",
        "rlimit_data", "nofile")  # every sample's; a boundary's and a new peak's add more
WARNED = ("threads", "maps", "rss_bytes")  # the series warned of at 80% of their limit
LIMIT_OF = {**{k: SERIES[k].limit_key for k in WARNED}, "pids_current": "pids_max"}
# the series and limits in words, for warnings
SERIES_WORDS = {**{k: SERIES[k].word for k in WARNED}, **{SERIES[k].limit_key: SERIES[k].limit_word
                                                   for k in WARNED},
         "pids_current": "pids.current"}
CPU_SHARE = 0.003  # of one core, for censuses at most (a thousand threads: ~8 ms each)
PACE_SHARE = 0.02  # of one core, for the faster samples of short cycles at most
MIN_INTERVAL_S = 0.1  # the shortest interval short cycles bring (pace)
LOADED_EVERY_S = 10.0  # the workload's maps scanned for frameworks at most this often
UNLOADED_EVERY_S = 2.0  # and, while none is found, at boundaries at most this often
RLIMITS = {"rlimit_as": "Max address space", "rlimit_data": "Max data size",
           "nofile": "Max open files"}  # /proc/PID/limits rows, as growth's limits


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
    got = read_tree(pid)
    return got["threads"], got["maps"], got["rss_bytes"]


def read_tree(pid: int, processes: list[Any] | None = None,
              who: dict[str, str] | None = None, *, own_root: bool = False) -> dict[str, int]:
    """The tree's threads and RSS (summed), and the largest map count, VmSize, VmData and
    open files of one process (each counts against that process's own limit). `who`, where
    the workload has children (DataLoader workers), gets the process that holds the most of
    each. `own_root`: the root is the sampling supervisor, whose threads and memory count
    (its pids limit, its memory limit are the workload's) but whose own files, maps and
    address space are none of the workload's."""
    import psutil

    out = dict.fromkeys(("threads", "processes", "maps", "rss_bytes", "vm_size_bytes",
                         "vm_data_bytes", "files"), 0)
    most: dict[str, tuple[int, Any]] = {}
    kinds: Counter[tuple[str, str]] = Counter()  # the children by (name, state)
    procs = processes if processes is not None else tree(pid)
    for i, p in enumerate(procs):
        root = own_root and i == 0 and p.pid == pid
        if not root:
            out["processes"] += 1
            if i > (1 if own_root else 0):  # the workload's children, not its main
                kinds[_kind(p)] += 1
        try:
            with p.oneshot():
                mem = p.memory_info()
                got = {"threads": p.num_threads(), "rss_bytes": mem.rss,
                       "vm_size_bytes": mem.vms, "vm_data_bytes": getattr(mem, "data", 0),
                       "files": p.num_fds()}
            got["maps"] = _map_count(p.pid)
        except psutil.Error:
            continue  # exited while we looked
        for key, value in got.items():
            summed = key in ("threads", "rss_bytes")
            if root and not summed:
                continue
            out[key] = out[key] + value if summed else max(out[key], value)
            if value > most.get(key, (-1, None))[0]:
                most[key] = (value, p)
    if who is not None and len(procs) > 2:  # beyond the supervisor and the workload's main
        who.update({k: _named(p) for k, (_, p) in most.items() if p is not None})
        if kinds:
            who["processes_what"] = children_words(kinds, procs[1 if own_root else 0])
    return out


def _kind(p: Any) -> tuple[str, str]:
    """(name, state) of a child: `true`, `zombie`; a zombie's name is its last command's."""
    try:
        with p.oneshot():
            return p.name(), p.status()
    except Exception:  # noqa: BLE001 - gone while we looked
        return "?", "gone"


def children_words(kinds: Counter[tuple[str, str]], parent: Any) -> str:
    """`31 zombies of true, children of python3 (pid 42)`, `4 python3 (sleeping), ...`: the
    workload's children by command and state, the most first."""
    parts = [f"{n} zombies of {name}" if state == "zombie" else f"{n} {name} ({state})"
             for (name, state), n in kinds.most_common(3)]
    try:
        owner = f"{parent.name()} (pid {parent.pid})"
    except Exception:  # noqa: BLE001
        owner = f"pid {getattr(parent, 'pid', '?')}"
    return f"{', '.join(parts)}, children of {owner}"


def _named(p: Any) -> str:
    """`python3 (pid 1234, a child)`: a process in a tree, for a growth line."""
    try:
        name = p.name()
    except Exception:  # noqa: BLE001 - gone: its pid alone
        name = "?"
    return f"{name} (pid {p.pid})"


def _maps_of(p: Any) -> int:
    return _map_count(p.pid)


def _map_count(pid: int) -> int:
    """Lines of /proc/PID/maps (psutil's memory_maps parses smaps: ~100x the cost)."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            return f.read().count(b"\n")
    except OSError:
        return 0


def soft_limits(pid: int) -> dict[str, int | None]:
    """RLIMIT_AS, RLIMIT_DATA and RLIMIT_NOFILE (soft) of one process; None: unlimited."""
    out: dict[str, int | None] = dict.fromkeys(RLIMITS)
    try:
        with open(f"/proc/{pid}/limits") as f:
            text = f.read()
    except OSError:
        return out
    for key, row in RLIMITS.items():
        for line in text.splitlines():
            if line.startswith(row):
                soft = line[len(row):].split()[0]
                out[key] = int(soft) if soft.isdigit() else None
    return out


def working_set(memory_dir: Path) -> int | None:
    """The cgroup's charge less its inactive file cache, which the kernel reclaims before it
    kills anything (the kubelet's working set): what runs into the memory limit. On v1 the
    charge is memory.stat's rss + cache, which the kernel keeps to the page, where
    usage_in_bytes moves in per-CPU batches of 256 KiB (the v1 docs say to use the stat)."""
    stat: dict[bytes, int] = {}
    try:
        with open(memory_dir / "memory.stat", "rb") as f:
            for line in f:
                key, _, value = line.partition(b" ")
                stat[key] = int(value)
    except (OSError, ValueError):
        pass
    if b"total_rss" in stat:  # v1
        usage: int | None = stat[b"total_rss"] + stat.get(b"total_cache", 0)
        inactive = stat.get(b"total_inactive_file", 0)
    else:
        usage = read_int_or_none(memory_dir / "memory.current")
        inactive = stat.get(b"inactive_file", 0)
    return None if usage is None else max(0, usage - inactive)


class KernelPeak:
    """The memory cgroup's own peak since the last boundary, where the kernel resets it for
    this reader alone: v2 `memory.peak` written through its own file descriptor (kernels from
    6.12; EINVAL before). Not v1's `memory.max_usage_in_bytes`: a reset there is everyone's,
    and the supervisor reads it as the run's peak. None where it cannot be."""

    def __init__(self, memory_dir: Path | None, v2: bool) -> None:
        import os

        self.fd: int | None = None
        if memory_dir is None or not v2:
            return
        try:
            self.fd = os.open(memory_dir / "memory.peak", os.O_RDWR)
            os.write(self.fd, b"reset\n")
        except OSError:
            self.close()

    def take(self) -> int | None:
        """The peak since the last call (or the start), and a fresh start."""
        import os

        if self.fd is None:
            return None
        try:
            peak = int(os.pread(self.fd, 64, 0))
            os.write(self.fd, b"reset\n")
        except (OSError, ValueError):
            return None
        return peak

    def close(self) -> None:
        import os

        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class Sampler:
    """Rows of the tree's counters into a JSON-lines file: `sample()` when `due()` (the
    supervisor's loop calls both: no thread), `sample(extra)` at a cycle boundary. `rows` keeps
    the recent ones (the growth watch reads and trims them)."""

    def __init__(self, pid: int, out: IO[str], limits: dict[str, int | None], *,
                 pids_dir: Path | None = None, interval: float = 1.0,
                 warn: Callable[[str], None] | None = None,
                 memory_dir: Path | None = None, memory_v2: bool = False,
                 on_sample: Callable[[dict[str, Any]], None] | None = None,
                 framework: str | None = None, own_root: bool = False) -> None:
        self.own_root = own_root  # `pid` is the supervisor sampling: see read_tree
        self.pid, self.out, self.limits = pid, out, limits
        self.pids_dir, self.interval, self.warn = pids_dir, interval, warn
        self.every = interval  # the interval now: shorter for short cycles (pace)
        self.memory_dir, self.on_sample, self.framework = memory_dir, on_sample, framework
        self.start_time = time.monotonic()
        self.warned: set[str] = set()
        self.samples = 0
        self.rows: list[dict[str, Any]] = []
        self.peak_threads = 0
        self.censused_at = 0  # the thread count of the last census at a peak
        self.kernel_peak = KernelPeak(memory_dir, memory_v2) if memory_dir else None
        self.cpu = {"sample": 0.0, "census": 0.0}  # the CPU seconds spent on each
        self.last_census: tuple[dict[str, dict[str, int]], float] | None = None
        self.loaded: dict[str, dict[str, str]] = {}  # frameworks the workload has mapped
        self.loaded_at: float | None = None  # when they were last read
        self.held_high: dict[str, int] = {}  # open files, maps: the count at their last census
        self.held_what: dict[str, tuple[str, str]] = {}  # its words and the kind that grew
        from launcher.telemetry.gpus import GpuSampler

        gpus = GpuSampler()
        self.gpus = gpus if gpus.any else None

    def sample(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        row = self._sample(extra)
        if self.on_sample is not None and extra is None:  # a periodic one may mark a
            self.on_sample(row)  # boundary (a window), which takes a sample of its own
        return row

    def _sample(self, extra: dict[str, Any] | None) -> dict[str, Any]:
        began = time.thread_time()
        try:
            return self._take(extra)
        finally:
            self.cpu["sample"] += time.thread_time() - began

    def _take(self, extra: dict[str, Any] | None) -> dict[str, Any]:
        processes = tree(self.pid)
        who: dict[str, str] = {}
        got = read_tree(self.pid, processes, who, own_root=self.own_root)
        pids_current = (read_int_or_none(self.pids_dir / "pids.current") if self.pids_dir
                        else None)
        row: dict[str, Any] = {"t": round(time.monotonic() - self.start_time, 3), **got,
                               "pids_current": pids_current,
                               **{k: self.limits.get(k) for k in (
                                   "pids_max", "max_map_count", "memory_limit_bytes",
                                   *RLIMITS)}}
        if self.memory_dir is not None:  # the run's own memory cgroup: the kernel's charge
            row["memory_bytes"] = working_set(self.memory_dir)
        self._held(row, processes)
        for key, (what, kind) in self.held_what.items():
            who[f"{key}_what"], who[f"{key}_kind"] = what, kind
        if who:
            row["who"] = who
        if self.gpus is not None:  # GPU memory and utilisation, when GPUs exist
            row["gpus"] = self.gpus.sample()
        if extra is not None:  # a boundary: the limits now, the kernel's peak, a census
            self._boundary(row, processes)
            row.update(extra)
        else:
            if processes and (self.loaded_at is None
                              or row["t"] - self.loaded_at > LOADED_EVERY_S):
                self._refresh(row, processes)  # where no line marks cycles, time windows
                # need the rlimits and the frameworks all the same
            if row["threads"] > max(self.censused_at * 1.1, self.censused_at + 4) and (
                    row["threads"] > self.peak_threads):
                self._census(row, processes)  # a new peak of threads: who they are
        self.peak_threads = max(self.peak_threads, row["threads"])
        self.out.write(json.dumps(row) + "\n")
        self.out.flush()
        self.rows.append(row)
        self.samples += 1
        self._check(row)
        return row

    def _held(self, row: dict[str, Any], processes: list[Any]) -> None:
        """Who holds the open files and the memory maps, where either reaches a new high by a
        tenth: the process holding the most, by kind and target (CENSUSES)."""
        import importlib

        theirs = processes[1:] if self.own_root and len(processes) > 1 else processes
        for key, (count, module, least, step) in CENSUSES.items():
            value, high = row.get(key) or 0, self.held_high.get(key, 0)
            if value < max(high * 1.1, high + step, least):
                continue
            held = [(count(p), p) for p in theirs]
            most = max((n for n, _ in held), default=0)
            # the first in the tree (the workload's main before its children) of those
            # holding nearly the most: a client's sockets, not its server child's other ends
            holder = next((p for n, p in held if n >= 0.9 * most), None)
            if holder is None or not most:
                continue
            self.held_high[key] = value
            census = importlib.import_module(f"launcher.telemetry.{module}")
            what = census.words(census.read(holder.pid), _named(holder))
            if what is not None:
                self.held_what[key] = what

    def _boundary(self, row: dict[str, Any], processes: list[Any]) -> None:
        if processes:
            self._refresh(row, processes, limits=True)
        if self.kernel_peak is not None:
            row["memory_peak_bytes"] = self.kernel_peak.take()
        self._census(row, processes)

    def _refresh(self, row: dict[str, Any], processes: list[Any], *,
                 limits: bool = False) -> None:
        """The workload's rlimits (at each boundary, else every LOADED_EVERY_S) and the
        frameworks it has mapped (every LOADED_EVERY_S), into `row`."""
        theirs = processes[1:] if self.own_root and len(processes) > 1 else processes
        workload = max(theirs, key=_threads_of)  # (not the supervisor, on a tie)
        stale = self.loaded_at is None or row["t"] - self.loaded_at > LOADED_EVERY_S
        if limits or stale:
            self.limits.update(soft_limits(workload.pid))
            row.update({k: self.limits.get(k) for k in RLIMITS})
        if stale or (not self.loaded and row["t"] - (self.loaded_at or 0.0) > UNLOADED_EVERY_S):
            from launcher.telemetry.census import loaded

            self.loaded, self.loaded_at = loaded(workload.pid, first=self.framework), row["t"]
        if self.loaded or limits:  # a boundary's row says it even where none is
            row["loaded"] = self.loaded

    def _census(self, row: dict[str, Any], processes: list[Any]) -> None:
        """Who the threads are; the last census again (with its time) where a new one would
        take more than CPU_SHARE of a core over the run (a thousand threads: ~8 ms each)."""
        from launcher.telemetry.census import census

        if self.last_census is not None and self.cpu["census"] > CPU_SHARE * row["t"]:
            row["census"], row["census_t"] = self.last_census
            return
        began = time.thread_time()
        self.last_census = (census(p.pid for p in processes), row["t"])
        self.cpu["census"] += time.thread_time() - began
        row["census"] = self.last_census[0]
        self.censused_at = row["threads"]

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
                self.warn(f"{SERIES_WORDS[key]} at {_shown(key, value)} reached "
                          f"{100 * value // limit}% of {SERIES_WORDS[limit_key]} "
                          f"{_shown(limit_key, limit)}")

    def pace(self, cycle_s: float) -> None:
        """Cycles shorter than a few intervals would each get one sample or none, and their
        peaks would be missed: sample four times a cycle then, at most every 0.1 s and never
        past PACE_SHARE of a core (TensorFlow's tree costs ~3 ms a sample: every 0.15 s), and
        never slower than the interval asked for."""
        per_sample = self.cpu["sample"] / max(self.samples, 1)
        self.every = min(self.interval, max(MIN_INTERVAL_S, per_sample / PACE_SHARE,
                                            cycle_s / 4))

    def due(self) -> bool:
        """A row taken within the last interval (a boundary's) is this tick's sample: no two
        rows closer than the interval asks for, whatever the cycles' pace."""
        last = self.rows[-1]["t"] if self.rows else -1e9
        return time.monotonic() - self.start_time - last >= 0.9 * self.every

    def close(self) -> None:
        """The kernel peak's descriptor closed (the rows' file is the caller's)."""
        if self.kernel_peak is not None:
            self.kernel_peak.close()


def _threads_of(p: Any) -> int:
    try:
        return int(p.num_threads())
    except Exception:  # noqa: BLE001 - gone: the least
        return 0


def _fds_of(p: Any) -> int:
    try:
        return int(p.num_fds())
    except Exception:  # noqa: BLE001 - gone: the least
        return 0


def _shown(key: str, value: int) -> str:
    from launcher.units import format_size

    return format_size(value) if key.endswith("bytes") else f"{value:,}"


# series -> (one process's count, the census module (its read and words), the least count
# censused, the least rise between two censuses)
CENSUSES: dict[str, tuple[Callable[[Any], int], str, int, int]] = {
    "files": (_fds_of, "fd_census", 8, 4), "maps": (_maps_of, "map_census", 256, 16)}
