"""Process and kernel limits read from /proc under a root path."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from launcher.errors import HostError
from launcher.kernel import proc_status as _status
from launcher.probe.cgroup import parse_cpu_list

# /proc/self/limits row names -> our names
_LIMIT_ROWS = {
    "Max processes": "nproc",
    "Max open files": "nofile",
    "Max stack size": "stack",
    "Max address space": "as",
    "Max data size": "data",
    "Max locked memory": "memlock",
}


@dataclass(frozen=True)
class Rlimit:
    soft: int | None  # None = unlimited
    hard: int | None


def read_rlimits(root: Path) -> dict[str, Rlimit]:
    path = root / "proc/self/limits"
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    out: dict[str, Rlimit] = {}
    for line in text.splitlines()[1:]:
        for row, name in _LIMIT_ROWS.items():
            if line.startswith(row):
                fields = line[len(row):].split()
                if len(fields) < 2:
                    raise HostError(f"{path}: malformed limits line {line!r}")
                out[name] = Rlimit(_limit(path, fields[0]), _limit(path, fields[1]))
    return out


def _limit(path: Path, text: str) -> int | None:
    if text == "unlimited":
        return None
    try:
        return int(text)
    except ValueError:
        raise HostError(f"{path}: malformed limit {text!r}") from None


def read_sysctl(root: Path, name: str) -> int | None:
    path = root / "proc/sys" / name.replace(".", "/")
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    try:
        return int(text)
    except ValueError:
        raise HostError(f"{path}: malformed value {text!r}") from None


def read_tasks(root: Path) -> int | None:
    """Every task the kernel runs, threads included (kernel.threads-max caps these, and each
    holds a PID, so kernel.pid_max too): the total of /proc/loadavg's 4th field (running/total).
    None where the file is missing (a captured tree from before it was captured)."""
    path = root / "proc/loadavg"
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    fields = text.split()
    running, slash, total = fields[3].partition("/") if len(fields) > 3 else ("", "", "")
    if not (slash and running.isdigit() and total.isdigit()):
        raise HostError(f"{path}: malformed line {text.strip()!r} (its 4th field is "
                        f"running/total tasks)")
    return int(total)


def read_affinity_list(root: Path) -> str | None:
    """CPUs this process may run on (Cpus_allowed_list), e.g. 0-3."""
    path = root / "proc/self/status"
    try:
        text = _status(path).get("Cpus_allowed_list")
    except FileNotFoundError:
        return None
    if text:
        parse_cpu_list(text, path)  # a malformed list is a HostError naming the file
    return text or None


def read_uid_tasks(root: Path, count: bool = True) -> tuple[int | None, int | None]:
    """(real UID of this process, tasks = threads of all processes with that real UID, or
    None when not `count`ed).

    RLIMIT_NPROC counts exactly these, across containers that share the UID.
    """
    proc = root / "proc"
    try:
        uid = int(_status(proc / "self/status")["Uid"].split()[0])
    except (FileNotFoundError, KeyError, ValueError, IndexError):
        return None, 0
    if not count:
        return uid, None
    tasks = 0
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        try:
            st = _status(d / "status")
            if int(st["Uid"].split()[0]) == uid:
                tasks += int(st.get("Threads", "1"))
        except (OSError, KeyError, ValueError, IndexError):
            continue  # the process exited while we looked
    return uid, tasks


def read_meminfo(root: Path) -> dict[str, int]:
    path = root / "proc/meminfo"
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    out = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        fields = rest.split()
        if fields and fields[0].isdigit():
            out[key] = int(fields[0]) * (1024 if fields[1:2] == ["kB"] else 1)
    return out
