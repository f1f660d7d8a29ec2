"""Running one chunk: its folder, environment and command, under the profile's caps through
an engine (a fresh process natively, a container in Docker), with one GPU and its own memory
limit; how it ended, read from the supervisor's exit file."""

from __future__ import annotations

import collections
import os
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from launcher import contract
from launcher.caps.resolve import Resolved
from launcher.contract import read_exit
from launcher.jobs.growth_guard import watch_env
from launcher.jobs.ledger import Chunk
from launcher.jobs.spec import JobSpec
from launcher.runtime.engine import Engine, Started
from launcher.runtime.owner import OWNER_LABEL, RUN_LABEL, owner
from launcher.runtime.spec import Mount, RunSpec, build_spec
from launcher.supervise import commit
from launcher.vendors.base import GpuSelection

TAIL_LINES = 20
STOP_GRACE_S = 10.0  # after a timeout's SIGTERM, SIGKILL


@dataclass
class Outcome:
    status: int
    diagnosis: str
    oom: bool = False
    peak: int | None = None  # bytes: the chunk's cgroup peak, else its largest process's RSS
    log_tail: str = ""
    timed_out: bool = False
    interrupted: bool = False
    gpu: int | None = None
    cgroup_peak: int | None = None  # the chunk's own memory cgroup's peak counter, if it had one


def chunk_dir(folder: Path, chunk_id: int) -> Path:
    return folder / "chunks" / f"{chunk_id:05d}"


def prepare_attempt(spec: JobSpec, chunk: Chunk, folder: Path,
            items: list[str] | None) -> tuple[list[str], dict[str, str], Path]:
    """A fresh attempt folder for the chunk (`{out}`: committed as `out` when it succeeds,
    earlier attempts' partial results gone); its command and variables."""
    cdir = chunk_dir(folder, chunk.id)
    cdir.mkdir(parents=True, exist_ok=True)
    out = Path(commit.new_attempt(str(cdir), str(max(1, chunk.attempts))))
    exit_file = cdir / "exit.json"
    exit_file.unlink(missing_ok=True)
    file: Path | None = None
    if items is not None:
        file = cdir / "items.txt"
        file.write_text("".join(line + "\n" for line in items[chunk.start:chunk.end]))
    env = contract.chunk_env(job=spec.name, index=chunk.id, start=chunk.start, end=chunk.end,
                             out=str(out), file=None if file is None else str(file))
    return (contract.substitute(spec.command, env),
            {**spec.env, **env, contract.EXIT_FILE: str(exit_file)}, exit_file)


def commit_output(attempt: Path, chunk: Chunk, status: int,
                  diagnosis: str) -> tuple[int, str]:
    """A chunk that succeeded: its attempt folder renamed into place as `out` (before the
    ledger says done); a commit that fails is the chunk's failure."""
    try:
        commit.commit(str(attempt), {"chunk": chunk.id, "items": [chunk.start, chunk.end],
                                     "attempt": attempt.name})
    except OSError as exc:
        return 1, f"its output could not be committed ({attempt} to out): {exc}"
    return status, diagnosis


class LocalExecutor:
    """Chunks on this machine through an engine, one per slot at a time."""

    def __init__(self, spec: JobSpec, r: Resolved, *, engine: Engine, folder: Path,
                 image: str | None, cwd: Path, items: list[str] | None,
                 memory_limit: int | None = None) -> None:
        self.spec, self.r, self.engine, self.folder = spec, r, engine, folder
        self.image, self.cwd, self.items = image, cwd, items
        # each chunk's own limit: workers.memory (its excess kills that chunk alone)
        self.memory_limit = memory_limit or r.profile.get("workers.memory")
        self.extra_env: dict[str, str] = {}  # e.g. the Ray node a chunk ran on
        self.running: dict[int, Started] = {}
        self.lock = threading.Lock()

    def run_spec(self, chunk: Chunk, gpu: int | None, argv: list[str],
                 env: dict[str, str]) -> RunSpec:
        sel = (GpuSelection(self.r.selection.vendor, (gpu,)) if gpu is not None
               else GpuSelection("none"))
        mounts = [Mount(str(self.cwd), str(self.cwd))]
        if not str(self.folder).startswith(str(self.cwd) + os.sep):
            mounts.append(Mount(str(self.folder), str(self.folder)))
        rs = build_spec(self.r, argv, image=self.image,
                        name=f"{self.spec.name}-c{chunk.id}-{uuid.uuid4().hex[:6]}",
                        mounts=mounts, workdir=str(self.cwd), user=f"{os.getuid()}:"
                                                                  f"{os.getgid()}",
                        selection=sel)
        if self.memory_limit:
            rs.limits = replace(rs.limits, memory=int(self.memory_limit), swap=0)
        rs.env.update({**env, **self.extra_env})
        # its supervisor watches it: telemetry in the chunk's folder, the profile's growth
        # keys (growth.stop: stopped before a limit, with 75, and tried again)
        rs.env.update(watch_env(self.r, Path(env[contract.EXIT_FILE]).parent))
        rs.labels.update({RUN_LABEL: f"{self.spec.name}/{chunk.id}", OWNER_LABEL: owner()})
        return rs

    def execute(self, chunk: Chunk, gpu: int | None, stopping: threading.Event,
                observe: Callable[[Started], None] | None = None) -> Outcome:
        argv, env, exit_file = prepare_attempt(self.spec, chunk, self.folder, self.items)
        rs = self.run_spec(chunk, gpu, argv, env)
        cdir = exit_file.parent
        tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        timed_out = threading.Event()
        timers: list[threading.Timer] = []
        own_memory: list[bool] = []  # the chunk had a memory cgroup of its own
        with (cdir / "log.txt").open("ab") as log:
            partial = {"stdout": b"", "stderr": b""}

            def sink(stream: str, data: bytes) -> None:
                log.write(data)
                log.flush()
                *lines, partial[stream] = (partial[stream] + data).split(b"\n")
                tail.extend(line.decode(errors="replace") for line in lines)

            def on_start(info: Started) -> None:
                own_memory.append("memory" in info.enforcement.enforced)
                if observe is not None:
                    observe(info)
                with self.lock:
                    self.running[chunk.id] = info
                if stopping.is_set() and info.stop:
                    info.stop(15)
                if self.spec.timeout and info.stop:
                    stop = info.stop

                    def expire() -> None:
                        timed_out.set()
                        stop(15)
                        later = threading.Timer(STOP_GRACE_S, stop, args=(9,))
                        later.daemon = True
                        later.start()
                        timers.append(later)

                    t = threading.Timer(self.spec.timeout, expire)
                    t.daemon = True
                    t.start()
                    timers.append(t)

            try:
                result = self.engine.run(rs, sink, on_start)
                tail.extend(p.decode(errors="replace") for p in partial.values() if p)
            finally:
                for t in timers:
                    t.cancel()
                with self.lock:
                    self.running.pop(chunk.id, None)
        ended = read_exit(exit_file) or {}  # how it ended: the supervisor's exit file alone
        status = int(ended.get("status", result.status))
        diagnosis = ended.get("diagnosis") or (
            f"the supervisor ended with status {status} before it could say why.")
        if timed_out.is_set():
            diagnosis = f"the chunk took longer than its {self.spec.timeout:g}s timeout."
        elif status == 0:
            status, diagnosis = commit_output(Path(env[contract.CHUNK_OUT]), chunk, status,
                                              diagnosis)
        # the cgroup's peak and OOM counters when the chunk had a cgroup of its own, else the
        # RSS of its largest process (a shared cgroup's counters would be everyone's: an OOM
        # kill there may have been another chunk's, so this one is retried, not split)
        own = bool(own_memory and own_memory[0])
        peak = ended.get("memory_peak") if own else None
        return Outcome(status, diagnosis, own and bool(ended.get("oom")),
                       peak or ended.get("maxrss"),
                       "\n".join(tail), timed_out.is_set(),
                       stopping.is_set() and status != 0, gpu, peak)

    def stop_all(self, sig: int = 15) -> None:
        with self.lock:
            running = list(self.running.values())
        for info in running:
            if info.stop:
                info.stop(sig)
