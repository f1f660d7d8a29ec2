"""One supervised run, from start to summary (`launcher run`): the engine runs the spec, its
telemetry is sampled from the moment it starts, how it ended is read from the supervisor's exit
file alone (launcher/contract.py), and summary.json is written; telemetry.png is drawn by a
detached process. The CLI parses and prints: output and notes go through callbacks."""

from __future__ import annotations

import gc
import json
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher import contract
from launcher.caps.resolve import Resolved
from launcher.errors import LauncherError
from launcher.runtime.engine import Engine, OutputSink, RunResult, Started
from launcher.runtime.spec import Mount, RunSpec
from launcher.telemetry.growth_watch import GrowthOptions
from launcher.telemetry.watch_settings import WatchSettings, is_off
from launcher.units import format_size

EXIT_FILE = "exit.json"


@dataclass
class Ended:
    status: int
    diagnosis: str
    started: bool  # False: the command could not be started where it ran
    summary: dict[str, Any] | None  # None: nothing ran, and no run folder is left
    signal: int | None = None  # the signal the workload died of


def supervised_run(engine: Engine, spec: RunSpec, r: Resolved, run_dir: Path, *,
                   command: list[str], interval: float, fresh: bool, on_output: OutputSink,
                   on_start: Callable[[Started], None], say: Callable[[str], None],
                   growth: GrowthOptions | None = None,
                   override: tuple[str, dict[str, Any]] | None = None) -> Ended:
    """Run `spec` with its record in `run_dir` (`fresh`: made for this run, so removed again
    when nothing ran). The supervisor watches (launcher/supervise/watcher.py: the samples,
    the cycles, growth, the stop) and writes telemetry.jsonl and the exit file there; this
    relays its output and lines, and writes summary.json with what the engine enforced.
    `on_start` is told when the workload started; `say` takes warnings. A refusal run anyway
    (`override`: its words and record) is said after the diagnosis and kept in summary.json."""
    exit_file = run_dir / EXIT_FILE
    exit_file.unlink(missing_ok=True)
    (run_dir / "telemetry.jsonl").unlink(missing_ok=True)
    _reach_exit_file(engine, spec, run_dir, exit_file)
    if not engine.runs_host_processes and _one_file(1, 2):
        spec.env[contract.ONE_STREAM] = "1"  # `2>&1` here: one stream in the container too
    if not is_off(spec.env):  # (`-e LAUNCHER_WATCH=0` turns it off)
        spec.env[contract.RECORD_DIR] = str(run_dir.resolve())
        spec.env.update(WatchSettings(
            growth=(growth or GrowthOptions()).to_json(), interval=interval,
            framework=r.framework, profile=r.caps.profile,
            estimate=r.caps.estimate.to_json(), runtime=engine.name).to_env())
    started = time.time()

    def started_hook(info: Started) -> None:
        on_start(info)

    # The run is a launcher process's last work: what was built to get here (modules, the
    # CLI, the profile) lives until it exits. Frozen, no collection walks it again, during the
    # run or at exit (~20 ms of every `launcher run`).
    gc.freeze()
    gc.enable()  # `launcher run` starts with it off (cli/main.py): nothing to collect yet
    threading.Thread(target=_import_the_end, name="launcher-warm", daemon=True).start()
    try:
        result = engine.run(spec, on_output, started_hook)
    except LauncherError:
        if fresh:  # it never started: no run folder
            shutil.rmtree(run_dir, ignore_errors=True)
        raise
    ended = contract.read_exit(exit_file)
    ran = ended is None or ended.get("started", True)
    if not ran and fresh:
        shutil.rmtree(run_dir, ignore_errors=True)  # nothing ran: no run folder
        return Ended(result.status, str(ended["diagnosis"]), False, None)
    diagnosis = (ended or {}).get("diagnosis") or (
        f"the workload exited with status {result.status}.")
    if ended is None and result.status == 128 + signal.SIGKILL:  # no word from the supervisor
        diagnosis = supervisor_killed(spec.limits.memory)
        say(diagnosis)
    telemetry = run_dir / "telemetry.jsonl"
    if not telemetry.exists():  # an unwatched run (the supervisor said why): no samples
        telemetry.touch()
    record = (ended or {}).get("growth") or {}
    status = result.status
    extra = {"growth": record, "exit_status": status,
             "workload_status": (ended or {}).get("workload_status", status),
             "memory_peak_kernel": own_memory_peak(engine, result, ended)}
    if override is not None:
        words, extra["override"] = override
        say(f"overridden: {words}.")
        diagnosis = f"{diagnosis} Overridden: {words}."
    summary = write_summary(run_dir, r, engine=engine, result=result, command=command,
                            diagnosis=diagnosis, started=started,
                            pids_peak=own_pids_peak(engine, result, ended), extra=extra)
    died_of = (ended or {}).get("signal")
    return Ended(status, diagnosis, ran, summary, died_of if isinstance(died_of, int) else None)


def supervisor_killed(memory: int | None) -> str:
    """The sentence of a run whose supervisor was killed before it wrote the exit file: its
    sentence and the workload's own end are lost. A supervisor that may not take itself out
    of the OOM killer's choice (no CAP_SYS_RESOURCE: a container's default capabilities) is
    the limit's next kill when the workload's kill leaves it alone in the cgroup before the
    kernel has freed the workload's memory (supervise/spawn.py)."""
    limit = (f"under the memory limit of {format_size(memory)} the kernel's OOM killer takes "
             f"it after the workload (it leaves the supervisor alone in the cgroup), or "
             if memory else "")
    return (f"the run's supervisor was killed (SIGKILL) before it recorded how the run "
            f"ended: {limit}a kill from outside (`docker kill`, a stop timeout, a second "
            f"Ctrl-C to launcher); telemetry.jsonl holds the samples it took.")


def _import_the_end() -> None:
    """The modules of a run's end, imported while the engine starts the workload (the main
    thread waits on the daemon or the child meanwhile): its summary."""
    import launcher.telemetry.summary  # noqa: F401


def _reach_exit_file(engine: Engine, spec: RunSpec, run_dir: Path, exit_file: Path) -> None:
    """The supervisor writes the exit file into the run folder: a process of this machine sees
    it where it is; a container gets the folder mounted at its own path."""
    spec.env[contract.EXIT_FILE] = str(exit_file.resolve())
    folder = str(run_dir.resolve())
    if not engine.runs_host_processes and not any(
            folder == m.target or folder.startswith(m.target.rstrip("/") + "/")
            for m in spec.mounts if m.source == m.target and not m.read_only):
        spec.mounts.append(Mount(folder, folder))


def _one_file(a: int, b: int) -> bool:
    try:
        return os.path.samestat(os.fstat(a), os.fstat(b))
    except OSError:
        return False


def own_pids_peak(engine: Engine, result: RunResult, ended: dict[str, Any] | None) -> int | None:
    """The supervisor's pids.peak, where its nearest pids cgroup is the run's own: a
    container's, or the run cgroup of a native run that enforces pids (else an ancestor
    shared with other processes)."""
    peak = (ended or {}).get("pids_peak")
    enforcement = result.enforcement
    counted = any("pids" in p.get("controllers", ()) for p in  # a counting cgroup
                  enforcement.cgroup.get("placed", []))
    own = "pids" in enforcement.enforced or counted or (  # a container without one: no
        not engine.runs_host_processes and "pids" not in enforcement.advisory)
    return peak if own and isinstance(peak, int) else None


def own_memory_peak(engine: Engine, result: RunResult,
                    ended: dict[str, Any] | None) -> int | None:
    """The supervisor's memory peak (memory.peak, max_usage_in_bytes), where its nearest
    memory cgroup is the run's own: a container's, or a native run's with a memory limit."""
    peak = (ended or {}).get("memory_peak")
    e = result.enforcement
    placed = any("memory" in p.get("controllers", ()) for p in e.cgroup.get("placed", []))
    own = "memory" in e.enforced or placed or (
        not engine.runs_host_processes and "memory" not in e.advisory)
    return peak if own and isinstance(peak, int) else None


def write_summary(run_dir: Path, r: Resolved, *, engine: Engine, result: RunResult,
                  command: list[str], diagnosis: str, started: float,
                  pids_peak: int | None = None,
                  extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The supervisor's summary.json with what only this side knows added: what the engine
    enforced, the command as given, the GPUs' names from the host's facts, the kernel's own
    pids peak of the run's cgroup, an override. Only where the supervisor left none (it was
    killed; the watch was off) is the summary made here, from its samples."""
    from launcher.telemetry.summary import read_series, summarize, with_kernel_pids_peak

    e = result.enforcement
    meta = {"run_id": run_dir.name, "profile": r.caps.profile, "framework": r.framework,
            "runtime": engine.name, "command": command, "exit_status": result.status,
            "diagnosis": diagnosis, "ended": time.time(),
            "threads_estimate": r.caps.estimate.to_json(),
            "engine": {"enforced": e.enforced, "advisory": e.advisory, "notes": e.notes,
                       "cgroup": e.cgroup}, **(extra or {})}
    names = {(g.vendor, g.index): g.model for g in r.facts.gpus}
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
        if not isinstance(summary, dict) or not summary.get("peaks"):
            raise ValueError  # none, or a run over before the watch began: no samples
    except (OSError, ValueError):
        summary = summarize(read_series(run_dir / "telemetry.jsonl"),
                            {**meta, "started": started}, names, pids_peak)
    else:
        if summary.get("growth"):  # the supervisor's own verdict, not its copy in exit.json
            meta.pop("growth", None)
        summary.update(meta)
        for g in summary.get("gpus") or ():
            g["name"] = g.get("name") or names.get((g.get("vendor"), g.get("gpu")))
        if pids_peak is not None and summary.get("peaks"):
            with_kernel_pids_peak(summary["peaks"], pids_peak)
    contract.write_json(run_dir / "summary.json", summary)  # in place of the supervisor's
    return summary


def plot_in_background(run_dir: Path) -> None:
    """telemetry.png, drawn by a detached process: matplotlib costs a second or more, and the
    user should not wait for it. `launcher report RUN_DIR --plot` draws it on demand."""
    import subprocess

    from launcher.shipped import pythonpath

    env = {**os.environ, "PYTHONPATH": pythonpath(os.environ.get("PYTHONPATH"))}
    subprocess.Popen([sys.executable, "-m", "launcher.telemetry", str(run_dir)], env=env,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)
