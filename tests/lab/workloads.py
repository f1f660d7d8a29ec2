"""The lab's workloads, one file copied by the guest as bomb.py, hog.py and busy.py (the name
picks the workload; `workloads.py NAME ARG` works too). Standard library only: they run under
/usr/bin/python3, as any user.

    bomb N   start sleeping threads until N or until Thread.start raises
    hog MB   allocate and touch memory in 10 MiB steps up to MB, printing each step reached
             (and its RSS)
    busy S   spin S seconds of wall time, then report the cgroup's cpu.stat and CPU/wall

Each prints one JSON line last. With LAB_MARK set, a workload writes `LAB_MARK.start` (its pid
and cgroup) and waits for `LAB_MARK.go` before it starts, and writes `LAB_MARK.end` (its
result) and waits for `LAB_MARK.fin` before it exits, so that the guest driver can read the
run's cgroup while the workload is in it (a run cgroup is gone once launcher has finished, and
kernel 6.1 counts `pids.events` only in the task's own cgroup).
"""

from __future__ import annotations

import json
import mmap
import os
import sys
import threading
import time

STEP_MIB = 10
PAGE = 4096


def own_cgroup() -> str:
    """The v2 path in /proc/self/cgroup (relative to the cgroup namespace's root)."""
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                if line.startswith("0::"):
                    return line[3:].strip()
    except OSError:
        pass
    return ""


def _put(suffix: str, data: dict[str, object]) -> None:
    mark = os.environ.get("LAB_MARK")
    if not mark:
        return
    tmp = f"{mark}.{suffix}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.rename(tmp, f"{mark}.{suffix}")


def _wait(suffix: str, timeout: float = 10.0) -> None:
    mark = os.environ.get("LAB_MARK")
    deadline = time.monotonic() + timeout
    while mark and not os.path.exists(f"{mark}.{suffix}") and time.monotonic() < deadline:
        time.sleep(0.005)


def start(name: str) -> None:
    _put("start", {"pid": os.getpid(), "cgroup": own_cgroup(), "workload": name})
    _wait("go")


def finish(result: dict[str, object]) -> None:
    print(json.dumps(result), flush=True)
    _put("end", result)
    _wait("fin")


def bomb(n: int) -> int:
    threading.stack_size(256 * 1024)  # small stacks: the pids limit stops it, not memory
    stop = threading.Event()
    started, error = 0, ""
    try:
        for _ in range(n):
            threading.Thread(target=stop.wait, daemon=True).start()
            started += 1
    except Exception as exc:  # noqa: BLE001 - the error is the result
        error = f"{type(exc).__name__}: {exc}"
    finish({"workload": "bomb", "started": started, "asked": n, "error": error,
            "cgroup": own_cgroup()})
    stop.set()
    return 0 if started == n else 1


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def hog(mib: int) -> int:
    """Each step is an anonymous mapping the kernel fills at once (MAP_POPULATE: one system
    call, not a fault per page, which user-mode Linux makes slow); a step the RSS does not
    show is touched page by page. `reached_mib` counts only resident steps."""
    step = STEP_MIB * 1024 * 1024
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_POPULATE", 0)
    held: list[mmap.mmap] = []
    reached = 0
    while reached < mib:
        before = rss()
        chunk = mmap.mmap(-1, step, flags=flags)
        if rss() - before < step * 9 // 10:  # not populated: touch every page
            for off in range(0, step, PAGE):
                chunk[off] = 1
        held.append(chunk)
        reached += STEP_MIB
        print(json.dumps({"workload": "hog", "reached_mib": reached,
                          "rss_mib": rss() // (1024 * 1024)}), flush=True)
    finish({"workload": "hog", "reached_mib": reached, "asked": mib, "done": True,
            "rss_mib": rss() // (1024 * 1024), "cgroup": own_cgroup()})
    return 0


def busy(seconds: float) -> int:
    t0, c0 = time.monotonic(), time.process_time()
    while time.monotonic() - t0 < seconds:
        pass
    wall, cpu = time.monotonic() - t0, time.process_time() - c0
    path = own_cgroup()
    stat: dict[str, int] = {}
    try:
        with open(f"/sys/fs/cgroup{path.rstrip('/')}/cpu.stat") as f:
            for line in f:
                k, v = line.split()
                if k in ("nr_throttled", "throttled_usec", "usage_usec", "nr_periods"):
                    stat[k] = int(v)
    except OSError as exc:
        stat = {"error": str(exc)}  # type: ignore[dict-item]
    finish({"workload": "busy", "cgroup": path, "cpu_stat": stat, "wall_s": round(wall, 3),
            "cpu_s": round(cpu, 3), "ratio": round(cpu / wall, 3) if wall else None})
    return 0


def main(argv: list[str]) -> int:
    name = os.path.basename(argv[0]).removesuffix(".py")
    args = argv[1:]
    if name not in ("bomb", "hog", "busy"):
        name, args = args[0], args[1:]
    start(name)
    if name == "bomb":
        return bomb(int(args[0]))
    if name == "hog":
        return hog(int(args[0]))
    return busy(float(args[0]))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
