"""The contract between launcher and its supervisor: what crosses the process (and container)
boundary. The variables launcher sets for the supervisor, their encodings and decodings, the
paths inside an image, and the exit file that says how a run ended. Standard library only, no
dataclasses: it is shipped in images and imported at every container and chunk start.

Every run (run, jobs, bench-memory, Ray, Kubernetes) learns how it ended from the exit file
alone, never from the supervisor's printed lines.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

# Inside an image built by launcher.
IN_IMAGE = "/opt/launcher"  # the supervisor and launcher's package
ENTRYPOINT = f"{IN_IMAGE}/entrypoint.py"
SUPERVISOR = ["python3", "-I", "-S", ENTRYPOINT]  # isolated: the image's ENV cannot steer it
ETC = "/etc/launcher"
CAPS_FILE = f"{ETC}/caps.json"  # the recipe, resolved where the image starts
BASE_ENV_FILE = f"{ETC}/base-env.json"  # the base image's environment, recorded at build
CALIBRATION_FILE = f"{ETC}/calibration.json"  # thread peaks measured in the image's build
ITEMS_DIR = f"{ETC}/items"  # a Kubernetes job's items file

# Variables launcher sets for the supervisor; none of them reaches the workload.
RESOLVED = "LAUNCHER_RESOLVED"  # "1": the caps were resolved by launcher; take them as given
REMOVE = "LAUNCHER_REMOVE"  # stale variable names to remove (encode_names)
WATCH_STDIN = "LAUNCHER_WATCH_STDIN"  # "1": stdin is the lifeline; its end means launcher died
LIFELINE_FD = "LAUNCHER_LIFELINE_FD"  # a native run's lifeline: an inherited fd (stdin is the
# workload's, as for any command)
LIFELINE_PATH = "LAUNCHER_LIFELINE_PATH"  # a container's with -i or -t: a FIFO launcher holds
ONE_STREAM = "LAUNCHER_ONE_STREAM"  # "1": launcher's stdout and stderr are one file (`2>&1`):
# the container's are one stream too, their order kept
RUN_CGROUPS = "LAUNCHER_RUN_CGROUPS"  # a native run's cgroup directories (encode_paths)
# the leaf moves to undo should launcher die first: JSON [[caller, [controllers], leaf], ...]
CGROUP_UNDO = "LAUNCHER_CGROUP_UNDO"
CPUSET = "LAUNCHER_CPUSET"  # a native run's CPUs, a CPU list ("" for all of the caller's)
RLIMITS = "LAUNCHER_RLIMITS"  # a native run's rlimits (encode_rlimits)
EXIT_FILE = "LAUNCHER_EXIT_FILE"  # where the supervisor writes how the run ended
RECORD_DIR = "LAUNCHER_RECORD_DIR"  # where the supervisor writes the run record (a folder)
# the watch's settings, JSON: {"growth": GrowthOptions.to_json(), "interval", "framework",
# "profile", "estimate", "runtime"}; "0" turns the watch off (a user may set that too)
WATCH = "LAUNCHER_WATCH"
SITE = "LAUNCHER_SITE"  # a native run's: where the supervisor finds psutil (entrypoint.py)
PRIVATE = (RESOLVED, REMOVE, WATCH_STDIN, LIFELINE_FD, LIFELINE_PATH, ONE_STREAM, RUN_CGROUPS,
           CGROUP_UNDO, CPUSET, RLIMITS, EXIT_FILE, RECORD_DIR, WATCH, SITE)
PSUTIL_IN_IMAGE = f"{IN_IMAGE}/psutil"  # the watch's one need beyond the standard library
# Variables a user or an image sets for the supervisor.
CAPS = "LAUNCHER_CAPS"  # another caps.json than CAPS_FILE
QUIET = "LAUNCHER_QUIET"  # say only warnings and a failure's diagnosis
VERBOSE = "LAUNCHER_VERBOSE"  # also the notes that change nothing (a shipped default lowered)

# A chunk's variables, for its workload: set by `launcher jobs run`, or by the supervisor from a
# Kubernetes Indexed Job's index (launcher.supervise.indexed); both through chunk_env.
JOB_ID = "LAUNCHER_JOB_ID"
CHUNK_INDEX = "LAUNCHER_CHUNK_INDEX"
CHUNK_START = "LAUNCHER_CHUNK_START"  # its items: [start, end)
CHUNK_END = "LAUNCHER_CHUNK_END"
CHUNK_OUT = "LAUNCHER_CHUNK_OUT"  # its attempt folder, committed as `out` when it succeeds
CHUNK_FILE = "LAUNCHER_CHUNK_FILE"  # its items, one a line (a job with an items file)
# An Indexed Job's, for the supervisor to derive the chunk from JOB_COMPLETION_INDEX.
CHUNK_SIZE = "LAUNCHER_CHUNK_SIZE"
CHUNK_OUT_ROOT = "LAUNCHER_CHUNK_OUT_ROOT"  # the chunks' folders (default /results)
ITEMS = "LAUNCHER_ITEMS"  # the job's item count
ITEMS_FILE = "LAUNCHER_ITEMS_FILE"  # the job's items file, one item a line
CHUNK_COMMITTED = "LAUNCHER_CHUNK_COMMITTED"  # its output was committed by an earlier pod
COMMIT_ATTEMPT = "LAUNCHER_COMMIT_ATTEMPT"  # the attempt folder the supervisor commits
PLACEHOLDERS = {"{index}": CHUNK_INDEX, "{start}": CHUNK_START, "{end}": CHUNK_END,
                "{out}": CHUNK_OUT, "{file}": CHUNK_FILE}


def chunk_env(*, job: str | None, index: int, start: int, end: int, out: str,
              file: str | None = None) -> dict[str, str]:
    """A chunk's variables: chunk `index` of job `job` (None: already set), items
    [start, end), its attempt folder `out`, its items file `file` if the job has one."""
    env = {CHUNK_INDEX: str(index), CHUNK_START: str(start), CHUNK_END: str(end),
           CHUNK_OUT: out}
    if job is not None:
        env[JOB_ID] = job
    if file is not None:
        env[CHUNK_FILE] = file
    return env


def substitute(command: list[str], chunk: dict[str, str]) -> list[str]:
    """`{index}`, `{start}`, `{end}`, `{out}`, `{file}` replaced by the chunk's (chunk_env)
    where they are whole arguments (never inside one, never through a shell); `{file}` is ""
    without an items file."""
    return [chunk.get(PLACEHOLDERS[arg], "") if arg in PLACEHOLDERS else arg for arg in command]


def flag(env: dict[str, str], name: str) -> bool:
    return env.get(name, "") not in ("", "0")


def encode_rlimits(limits: dict[str, tuple[int, int]]) -> str:
    """{"nofile": (4096, 4096), "stack": (8388608, -1)} -> "nofile=4096:4096,stack=...:-1"
    (-1: unlimited)."""
    return ",".join(f"{name}={soft}:{hard}" for name, (soft, hard) in limits.items())


def decode_rlimits(text: str) -> dict[str, tuple[int, int]]:
    out = {}
    for item in filter(None, text.split(",")):
        name, _, pair = item.partition("=")
        soft, _, hard = pair.partition(":")
        out[name] = (int(soft), int(hard))
    return out


def encode_undo(moves: list[tuple[Any, tuple[str, ...], Any]]) -> str:
    """Leaf moves to undo (CGROUP_UNDO): (caller's cgroup, controllers enabled, leaf)."""
    return json.dumps([[str(a), list(cs), str(b)] for a, cs, b in moves])


def decode_undo(text: str) -> list[tuple[str, list[str], str]]:
    try:
        return [(str(a), list(cs), str(b)) for a, cs, b in json.loads(text)] if text else []
    except (ValueError, TypeError):
        return []


def encode_paths(paths: list[str]) -> str:
    return ":".join(paths)


def decode_paths(text: str) -> list[str]:
    return [p for p in text.split(":") if p]


def encode_names(names: list[str]) -> str:
    return ",".join(sorted(set(names)))


def decode_names(text: str) -> list[str]:
    return [n for n in text.split(",") if n]


# The exit file: {"status": int (the run's exit status: 128+N for a signal), "signal": N where
# the workload died of signal N (launcher then ends by it too, after its record), "diagnosis": the
# one sentence, "started": False when the command could not be started at all, "oom": bool,
# "memory_peak": bytes or None, "pids_peak": the nearest pids.peak (tasks) or None,
# "maxrss": bytes}.
def write_exit(path: str, record: dict[str, Any]) -> None:
    """Written whole (it may outlive launcher: a rerun reads it to tell a finished chunk from
    an interrupted one); silently not at all when the folder is gone."""
    with contextlib.suppress(OSError):
        write_json(path, record, indent=None)


def write_json(path: str | os.PathLike[str], data: Any, indent: int | None = 2) -> None:
    """A record file written whole or not at all (a reader never sees half of it): beside it,
    then renamed into place; a file another user left there (a container's root) is
    replaced, not written into. The one atomic writer of run and job records."""
    tmp = f"{os.fspath(path)}.tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    with open(tmp, "w") as f:
        json.dump(data, f, indent=indent)
        if indent is not None:
            f.write("\n")
    os.replace(tmp, path)


def read_exit(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("status"), int) else None


# The signals a terminal, a user or a pipe sends to stop a command: a workload that died of one
# ends launcher by it too. A death launcher explains (SIGKILL from the OOM killer, SIGSEGV,
# SIGABRT) stays an exit status, 128 + N, as a shell reports it ($? is the same either way).
ENDS_BY = (2, 3, 1, 15, 13)  # SIGINT, SIGQUIT, SIGHUP, SIGTERM, SIGPIPE


def die_of(sig: int) -> None:
    """End this process by `sig`, as the workload did, so that a shell's loop or `set -e`
    sees the signal (bash's "wait and cooperative exit", FIELD.md 45); no core file of ours.
    Returns where the signal does not end it (PID 1: the kernel protects it)."""
    import contextlib
    import os
    import resource
    import signal

    with contextlib.suppress(OSError, ValueError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
    os.kill(os.getpid(), sig)
