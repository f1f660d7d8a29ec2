"""Small helpers the reference workloads share: where to write, what the caps are, counters."""

from __future__ import annotations

import argparse
import json
import os
import resource
from collections.abc import Callable
from pathlib import Path
from typing import Any


def out_dir(explicit: str | None, name: str) -> Path:
    """--out, else this run's folder (`launcher run` names it), else runs/NAME."""
    if explicit:
        d = Path(explicit)
    elif os.environ.get("LAUNCHER_RUN_DIR"):
        d = Path(os.environ["LAUNCHER_RUN_DIR"]) / name
    else:
        d = Path(os.environ.get("LAUNCHER_RUNS_DIR") or "runs") / name
    d.mkdir(parents=True, exist_ok=True)
    return d


def env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def threads_now() -> int:
    return len(os.listdir("/proc/self/task"))


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def write_json(path: Path, data: Any) -> None:
    """Whole or not at all: a killed run never leaves half a result behind."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def limits() -> dict[str, int | None]:
    """pids and memory headroom of this process's cgroup (None where unlimited)."""
    from launcher.probe.host import probe_host

    cg = probe_host("/").cgroup
    return {"pids_max": cg.pids_max, "pids_current": cg.pids_current,
            "memory_limit": cg.memory_limit, "memory_usage": cg.memory_usage}


def describe_limits(lim: dict[str, int | None]) -> str:
    """The banner's words for `limits()`: `pids 12/77, memory 210MiB of 300MiB`."""
    from launcher.units import format_size

    pids = (f"pids {lim['pids_current'] if lim['pids_current'] is not None else '?'}/"
            f"{lim['pids_max']}" if lim["pids_max"] else "no pids limit")
    if lim["memory_limit"]:
        used = format_size(lim["memory_usage"]) if lim["memory_usage"] else "?"
        memory = f"memory {used} of {format_size(lim['memory_limit'])}"
    else:
        memory = "no memory limit"
    return f"{pids}, {memory}"


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number >= `minimum`, so that a nonsense value is a usage error
    (exit 2) before `launcher run` starts anything. The built-in workloads share it."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number (got {text!r})") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum} (got {value})")
        return value

    return parse
