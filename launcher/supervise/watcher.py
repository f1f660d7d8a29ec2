"""The watch beside the workload, in the supervisor: wherever the workload runs (`launcher run`,
a container started by docker, compose or a pod, a job's chunk), the same code samples it,
reads its cycles from its output, fits the growth, says its lines, stops it before a limit
when asked, and writes the run record that `launcher report` reads.

What it is told comes in one variable (contract.WATCH, JSON, set by `launcher run` and
`launcher jobs`), else from the image's recipe (the profile's `growth` keys). Where the record
goes: contract.RECORD_DIR, else $LAUNCHER_RUN_DIR (a compose service's `./runs/NAME`), else a
new folder under $LAUNCHER_RUNS_DIR or a RunPod pod's /workspace/runs; else none, and a
Kubernetes container's closing sentence is its termination message. It runs in the supervisor's one
thread (pids: a watcher thread would count against the workload's limit); psutil is the one
thing it needs beyond the standard library, and without it the run goes on with its caps.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from launcher import contract as c
from launcher.proctree import is_init
from launcher.telemetry.watch_settings import WatchSettings

POD_RUNS = "/workspace/runs"  # a RunPod pod's volume
TERMINATION_LOG = "/dev/termination-log"  # a Kubernetes container's termination message
TERMINATION_MAX = 4096  # bytes the kubelet keeps of it


def record_folder(environ: dict[str, str], command: list[str]) -> tuple[Path | None, bool]:
    """Where the run record goes (see the module's words), and whether that folder is the
    run's own to make (a new one under a runs folder) rather than named to it; None: nowhere
    to keep it. A pod's /workspace/runs only on RunPod (RUNPOD_POD_ID): elsewhere a writable
    /workspace is a user's project (NGC images), not a place to write into unasked."""
    for name in (c.RECORD_DIR, "LAUNCHER_RUN_DIR"):
        if environ.get(name):
            return Path(environ[name]), False
    runs = environ.get("LAUNCHER_RUNS_DIR") or (
        POD_RUNS if environ.get("RUNPOD_POD_ID") else None)
    if not runs:
        return None, False
    host = "".join(ch for ch in os.uname().nodename if ch.isalnum() or ch in "-_")[:24]
    name = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.path.basename(command[0]) or 'run'}"
    return Path(runs) / (f"{name}-{host}" if host else name), True


def make_folder(folder: Path, new: bool) -> Path:
    """The record's folder made: a new one (another start in the same second, a replica: a
    suffix) or the one named (LAUNCHER_RUN_DIR: the last start's record)."""
    if not new:
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    for n in range(100):
        candidate = folder if n == 0 else folder.with_name(f"{folder.name}-{n}")
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue
    raise FileExistsError(f"{folder} and 99 more exist")


class Watcher:
    """Started once the workload is (`begin`), fed its output and ticks, finished with its
    status (`finish`): the exit status and sentence after growth, and the record written."""

    def __init__(self, settings: WatchSettings, folder: Path | None, command: list[str],
                 say: Callable[[str], None]) -> None:
        from launcher.telemetry.growth_watch import GrowthWatch

        self.settings, self.folder, self.command, self.say = settings, folder, command, say
        self.started = time.time()
        self.options = settings.options
        self.watch = GrowthWatch(self.options, lambda line: say(line))
        from launcher.supervise.reading import for_watch

        self.reading = for_watch(self.watch)
        self.pid: int | None = None
        self.sampler: Any = None
        self.out: IO[str] | None = None
        self.kill_at: float | None = None
        self.ended_at: float | None = None  # on the samples' clock: when the workload ended

    def exited(self) -> None:
        """The workload is gone (its status reaped): the moment its growth stopped."""
        if self.sampler is not None:
            self.ended_at = time.monotonic() - self.sampler.start_time

    @classmethod
    def begin(cls, environ: dict[str, str], command: list[str], say: Callable[[str], None],
              settings: WatchSettings) -> Watcher:
        """A watcher told `settings`, its record's folder made where there is
        one (where it cannot be: said, and no record)."""
        folder, new = record_folder(environ, command)
        if folder is not None:
            try:
                folder = make_folder(folder, new)
            except OSError as exc:
                say(f"warning: no run record: cannot create {folder}: {exc.strerror or exc}")
                folder = None
        return cls(settings, folder, command, say)

    def start(self, pid: int, own_cgroups: list[str]) -> None:
        """Sampling from the workload's start: the supervisor's tree (the workload, its
        children, orphans it reaps), against the limits of its cgroup and rlimits."""
        from launcher.telemetry.run_limits import limits_of, memory_dir_of
        from launcher.telemetry.sampler import Sampler

        self.pid = pid
        if not self.settings.sample:  # no psutil here: the words alone
            return
        facts = _Facts()
        limits, pids_dir = limits_of(os.getpid(), facts)  # type: ignore[arg-type]
        estimate = (self.settings.estimate or {}).get("total")
        limits["threads_estimate"] = estimate
        memory_dir, v2 = memory_dir_of(os.getpid())
        # the memory cgroup the workload is in: the supervisor may have left the run's
        # (run.Run.spawn; a zombie's cgroups are no longer its own, nor a gone one's)
        theirs, theirs_v2 = memory_dir_of(pid) if _running(pid) else (None, False)
        if theirs is not None and theirs != memory_dir:
            memory_dir, v2 = theirs, theirs_v2
            limits["memory_limit_bytes"] = limits_of(pid, facts)[0]["memory_limit_bytes"]  # type: ignore[arg-type]
        own = is_init() or (memory_dir is not None and str(memory_dir) in own_cgroups)
        # no folder: the rows in a file of our own all the same, for the fit at the end
        import tempfile

        path = self.folder / "telemetry.jsonl" if self.folder is not None else None
        self.out = open(path, "w") if path else tempfile.TemporaryFile("w+")  # noqa: SIM115
        self.sampler = Sampler(
            os.getpid(), self.out, limits, pids_dir=pids_dir,
            memory_dir=memory_dir if own else None, memory_v2=v2,
            interval=self.settings.interval,
            warn=lambda msg: self.say(f"warning: {msg}"), on_sample=self.watch.on_sample,
            framework=_label(self.settings.framework), own_root=True)
        self.watch.attach(self.sampler, self._signal, self._kill_later)
        self.sampler.sample()  # the first row: the run's start

    def output(self, stream: str, data: bytes, came: float | None = None) -> None:
        """The workload's output, passed on already: read within the watch's CPU budget
        (reading.py), the rest skipped and counted. `came`: when it was read, where that was
        before now (monotonic)."""
        self.reading.output(stream, data, came)

    def tick(self) -> float:
        """A sample where one is due, and the SIGKILL of a stop whose grace is over; the
        seconds until the next."""
        if self.sampler is None:
            return 1.0
        if self.kill_at is not None and time.monotonic() >= self.kill_at:
            self.kill_at = None
            self._signal(signal.SIGKILL)
        try:
            if self.sampler.due():
                self.sampler.sample()
        except Exception as exc:  # noqa: BLE001 - a bug in the watch never stops the run
            self.sampler = None
            self.say(f"warning: the run is no longer sampled ({type(exc).__name__}: {exc})")
            return 1.0
        wait = self.sampler.every
        if self.kill_at is not None:
            wait = min(wait, max(0.0, self.kill_at - time.monotonic()))
        return wait

    def _signal(self, sig: int) -> None:
        """The stop: SIGTERM to the workload (it may write its checkpoint), SIGKILL to its
        whole tree after the grace."""
        from launcher.supervise.lifeline import signal_tree

        if sig == signal.SIGKILL:
            signal_tree(signal.SIGKILL)
        elif self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def _kill_later(self, seconds: float) -> None:
        self.kill_at = time.monotonic() + seconds

    def finish(self, code: int, sentence: str, ended: dict[str, Any],
               extra: dict[str, Any]) -> tuple[int, str, dict[str, Any]]:
        """(the exit status, the sentence, the growth record) after growth: 75 and the stop's
        words for a stop, the growth that led to a death named in its sentence. The record
        (telemetry.jsonl, summary.json) is in the folder, where there is one."""
        self.kill_at = None  # no SIGKILL for a process that is gone (or a PID reused)
        if self.sampler is not None:
            self.sampler.close()
        try:  # a full disk, a row cut short: the run's own status and sentence stand
            from launcher.telemetry.growth_verdict import growth_record

            self.reading.close()
            rows = self._rows()
            record = growth_record(rows, self.watch.result(), ended, status=code,
                                   ended_at=self.ended_at)
            record["output"] = self.reading.record()
            status = int(record.pop("status", code))
            sentence = str(record.get("diagnosis") or sentence)
        except Exception as exc:  # noqa: BLE001
            self.say(f"warning: the growth record could not be made ({type(exc).__name__}: "
                     f"{exc})")
            return code, sentence, {"error": f"{type(exc).__name__}: {exc}"}
        if self.folder is not None:
            try:
                self._summary(rows, status, code, sentence, record, extra)
            except Exception as exc:  # noqa: BLE001
                self.say(f"warning: no summary.json in {self.folder} ({type(exc).__name__}: "
                         f"{exc})")
        return status, sentence, record

    def _rows(self) -> list[dict[str, Any]]:
        if self.out is None:
            return []
        with contextlib.suppress(OSError, ValueError):
            self.out.flush()
        if self.folder is not None:
            self.out.close()
            from launcher.telemetry.summary import read_series

            return read_series(self.folder / "telemetry.jsonl")
        self.out.seek(0)
        rows = [json.loads(line) for line in self.out if line.strip()]
        self.out.close()
        return rows

    def _summary(self, rows: list[dict[str, Any]], status: int, workload: int, sentence: str,
                 record: dict[str, Any], extra: dict[str, Any]) -> None:
        """summary.json as the supervisor knows the run (`launcher run` writes it again with
        what the engine enforced)."""
        from launcher.telemetry.summary import summarize

        assert self.folder is not None
        meta = run_meta(self.settings, self.folder, self.command, status=status,
                        workload=workload, sentence=sentence, started=self.started,
                        record=record, extra=extra)
        write_summary(self.folder, summarize(rows, meta, None, extra.get("pids_peak_kernel")))


def run_meta(settings: WatchSettings, folder: Path, command: list[str], *, status: int,
             workload: int, sentence: str, started: float, record: dict[str, Any] | None,
             extra: dict[str, Any]) -> dict[str, Any]:
    """summary.json's words of the run, as the supervisor knows it (`launcher run` writes
    it again with what the engine enforced)."""
    return {"run_id": folder.name, "profile": settings.profile,
            "framework": settings.framework,
            "runtime": settings.runtime or ("container" if is_init() else "native"),
            "command": command, "exit_status": status, "diagnosis": sentence,
            "started": started, "ended": time.time(),
            "threads_estimate": settings.estimate, "growth": record or {},
            "workload_status": workload, "recorded_by": "supervisor", **extra}


def write_summary(folder: Path, summary: dict[str, Any]) -> None:
    c.write_json(folder / "summary.json", summary)


def quick_record(environ: dict[str, str], command: list[str], settings: WatchSettings,
                 code: int, sentence: str, started: float,
                 extra: dict[str, Any]) -> str | None:
    """The record of a run over before the watch began (no samples, no growth): its folder,
    or None where there is none."""
    folder, new = record_folder(environ, command)
    if folder is None:
        return None
    try:
        folder = make_folder(folder, new)
        (folder / "telemetry.jsonl").touch()
        meta = run_meta(settings, folder, command, status=code, workload=code,
                        sentence=sentence, started=started, record=None, extra=extra)
        write_summary(folder, {**meta, "samples": 0, "duration_s": 0.0, "peaks": {},
                               "gpus": []})
    except OSError:
        return None
    return str(folder)


def termination_message(sentence: str) -> None:
    """A Kubernetes container's closing sentence, where the kubelet reads it (`kubectl
    describe pod`, the pod's status)."""
    if not os.path.exists(TERMINATION_LOG):
        return
    with contextlib.suppress(OSError), open(TERMINATION_LOG, "w") as f:
        f.write(sentence.encode()[:TERMINATION_MAX].decode(errors="ignore"))


class _Facts:
    """What limits_of needs of the host, read here (the container's view), by the probe's
    own readers."""

    def __init__(self) -> None:
        from launcher.probe.limits import read_meminfo, read_sysctl

        root = Path("/")
        self.max_map_count = read_sysctl(root, "vm.max_map_count")
        self.mem_total = read_meminfo(root).get("MemTotal")


def _label(framework: str | None) -> str | None:
    if not framework:
        return None
    from launcher.frameworks import get, known

    return get(framework).label if known(framework) else None


def _running(pid: int) -> bool:
    """`pid` has not ended (not a zombie, not gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return False

