"""The Slurm backend: the same job, ledger, pull queue and OOM split, with each chunk a Slurm
job (`sbatch`) that runs on whichever node Slurm gives it. The job asks for the chunk's caps:
`--mem` the measured peak (workers.memory; Slurm's `task/cgroup` enforces it, and its OOM kill
is split like any other), `--cpus-per-task` the pools' size, one GPU where the profile has them;
on its node the chunk runs under launcher's supervisor with the caps resolved there, against the
job's cgroup. Each chunk is its own job rather than an array task: the pull queue hands out
chunks as slots free, and a split chunk's halves are new work an array could not hold.

Its jobs are named `launcher-JOB`; a launcher killed with -9 leaves them to Slurm, and the next
`launcher jobs run` of that job takes over each one still queued or running for a chunk it
hands out again (watched to its end, its outcome read as before: not submitted twice), and
cancels the rest (`scancel --name launcher-JOB` stops them all by hand).
Which Slurm job ran which chunk (and where its outcome goes) is kept in
FOLDER/slurm/jobs.jsonl; `launcher jobs status` reads their states from Slurm through this
backend's `external_state` (`squeue` while the controller knows a job, then `sacct`:
accounting where it is on, else the jobcomp file).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shlex
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from launcher.errors import LauncherError
from launcher.flags import Flag
from launcher.jobs.execute import Outcome
from launcher.jobs.job import Prepared
from launcher.jobs.ledger import Chunk
from launcher.jobs.runner import Slot
from launcher.render.targets import JobRenderOptions, RenderedJob
from launcher.runtime.engines import first_that, get_engine

# The options this backend takes on `jobs run` (--backend slurm), declared here alone.
FLAGS = {"partition": Flag(("--partition",), "The Slurm partition (sbatch --partition)."),
         "account": Flag(("--account",), "The account charged (sbatch --account)."),
         "time": Flag(("--time",), "Each chunk's time limit (sbatch --time, e.g. 30:00)."),
         "sbatch_args": Flag(("--sbatch-args",), "More sbatch arguments, split as a shell "
                             "would (e.g. '--qos=low').")}
JOBS_FILE = "jobs.jsonl"  # in FOLDER/slurm: which Slurm job ran which chunk, one a line
DONE = {"COMPLETED", "FAILED", "OUT_OF_MEMORY", "CANCELLED", "TIMEOUT", "NODE_FAIL",
        "PREEMPTED", "BOOT_FAIL", "DEADLINE"}
POLL_S = 1.0  # how often Slurm is asked a running chunk's state (scontrol, ~0.1 s of CPU)
WATCH_S = 0.05  # how often its outcome file is looked for (a stat)
ACTIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED",
          "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED"}  # still Slurm's to run or end
SHOWN = 8  # `jobs status`: at most this many active Slurm jobs named one per line


def _slurm(*argv: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LauncherError(f"{argv[0]} failed: {exc}") from None


def job_state(job_id: str) -> tuple[str | None, str]:
    """(JobState, ExitCode) from `scontrol -o show job`; (None, "") once Slurm forgot it."""
    done = _slurm("scontrol", "-o", "show", "job", job_id)
    if done.returncode != 0:
        return None, ""
    fields = dict(w.split("=", 1) for w in done.stdout.split() if "=" in w)
    return fields.get("JobState"), fields.get("ExitCode", "")


def _last_option(options: list[str], *names: str) -> str | None:
    """The value sbatch takes for an option said more than once: the last one."""
    value = None
    for i, o in enumerate(options):
        for n in names:
            if o.startswith(f"{n}="):
                value = o.split("=", 1)[1]
            elif o == n and i + 1 < len(options):
                value = options[i + 1]
    return value


def _mebibytes(mem: str) -> int | None:
    """sbatch's --mem (a number of MiB, or with a K/M/G/T suffix) in MiB."""
    scale = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024**2}
    try:
        if mem[-1:].upper() in scale:
            return int(float(mem[:-1]) * scale[mem[-1].upper()])
        return int(mem)
    except ValueError:
        return None


def payload_base(p: Prepared, folder: Path, gpus: int, engine: str) -> dict[str, Any]:
    """What every chunk's task needs: the recipe its caps are resolved from on the node, and
    the engine that runs it there (by name: the task loads that one alone)."""
    r = p.resolved
    return {"recipe": r.recipe(), "overrides": r.overrides, "spec": p.spec.to_json(),
            "folder": str(folder), "cwd": str(p.spec.path.resolve().parent), "gpus": gpus,
            "engine": engine}


def sbatch_options(p: Prepared, gpus: int, options: dict[str, str]) -> list[str]:
    """The chunk's caps as sbatch options: its CPUs, its memory, its GPU, and the user's."""
    out = [f"--cpus-per-task={max(1, p.resolved.caps.threads['omp'])}", "--nodes=1",
           "--ntasks=1", f"--chdir={p.spec.path.resolve().parent}"]
    if p.plan.peak_bytes:
        out.append(f"--mem={-(-int(p.plan.peak_bytes) // 2**20)}M")
    if gpus:
        out.append("--gres=gpu:1")
    out += [f"--{key}={options[key]}" for key in ("partition", "account", "time")
            if options.get(key)]
    return out + shlex.split(options.get("sbatch_args") or "")


class SlurmExecutor:
    def __init__(self, p: Prepared, folder: Path, items: list[str] | None,
                 options: dict[str, str], engine: str) -> None:
        self.p, self.folder, self.items = p, folder, items
        self.jobs: dict[int, str] = {}
        self.lock = threading.Lock()
        self.gpus = 1 if p.plan.gpus[0] is not None else 0
        self.name = f"launcher-{p.spec.name}"
        self.sbatch = ["sbatch", "--parsable", f"--job-name={self.name}",
                       *sbatch_options(p, self.gpus, options)]
        self.base = payload_base(p, folder, self.gpus, engine)
        self.spool = folder / "slurm"
        self.spool.mkdir(parents=True, exist_ok=True)
        self.index = self.spool / JOBS_FILE
        # chunk -> (Slurm job, outcome file): a killed launcher's, still queued or running
        self.adoptable: dict[int, tuple[str, Path]] = {}

    def take_over(self) -> list[str]:
        """The jobs a killed launcher left under this job's name: each chunk's last job, still
        queued or running, kept for that chunk's next claim; any other is cancelled. Returns
        the ids taken over."""
        try:
            active = [j for j, st in squeue_states(self.name).items() if st["state"] in ACTIVE]
        except LauncherError:  # unread: none taken over, none left running beside this run
            _slurm("scancel", f"--name={self.name}")
            return []
        last = _recorded_outcomes(self.spool / JOBS_FILE)
        ours = {job: (chunk, outcome) for chunk, (job, outcome) in last.items() if outcome}
        stale = [j for j in active if j not in ours]
        if stale:
            _slurm("scancel", *stale)
        for job in active:
            if job in ours:
                chunk, outcome = ours[job]
                self.adoptable[chunk] = (job, Path(outcome))
        return sorted(j for j in active if j in ours)

    def asked(self) -> dict[str, str | None]:
        """What each job gets: sbatch's last word for each option (sbatch_args may say one
        again: its --mem below workers.memory is the limit that binds, so it is the figure)."""
        return {"cpus": _last_option(self.sbatch, "--cpus-per-task", "-c"),
                "mem": _last_option(self.sbatch, "--mem")}

    def submit(self, chunk: Chunk) -> tuple[str, Path]:
        stem = self.spool / f"{chunk.id:05d}-{time.time_ns()}"
        payload = {**self.base, "chunk": dataclasses.asdict(chunk),
                   "items": self.items[chunk.start:chunk.end] if self.items else None}
        Path(f"{stem}.json").write_text(json.dumps(payload))
        outcome = Path(f"{stem}.outcome.json")
        wrap = shlex.join([sys.executable, "-m", "launcher.jobs.slurm_task", f"{stem}.json",
                           str(outcome)])
        done = _slurm(*self.sbatch, f"--output={stem}.log", f"--wrap={wrap}")
        if done.returncode != 0:
            raise LauncherError(f"sbatch refused chunk {chunk.id}: "
                                f"{(done.stderr or done.stdout).strip()[:300]}")
        job_id = done.stdout.strip().split(";")[0]
        with self.lock, self.index.open("a") as f:  # one line per job: chunk -> Slurm job
            f.write(json.dumps({"chunk": chunk.id, "job": job_id, "at": time.time(),
                                "outcome": str(outcome)}) + "\n")
        return job_id, outcome

    def execute(self, chunk: Chunk, gpu: int | None, stopping: threading.Event) -> Outcome:
        with self.lock:  # a killed launcher's job for this chunk, else a new one
            adopted = self.adoptable.pop(chunk.id, None)
        job_id, outcome = adopted or self.submit(chunk)
        with self.lock:
            self.jobs[chunk.id] = job_id
        try:
            state, code = job_state(job_id)
            asked = time.monotonic()
            while state is not None and state not in DONE:
                if stopping.is_set():
                    _slurm("scancel", job_id)
                    return Outcome(143, "stopped with the job", interrupted=True)
                time.sleep(WATCH_S)
                if _succeeded(outcome):  # the task's last act: its job is ending, done
                    return _outcome(job_id, "COMPLETED", "0:0", outcome)
                if time.monotonic() - asked >= POLL_S:
                    state, code = job_state(job_id)
                    asked = time.monotonic()
            return _outcome(job_id, state, code, outcome)
        finally:
            with self.lock:
                self.jobs.pop(chunk.id, None)

    def stop_all(self, sig: int = 15) -> None:
        with self.lock:  # the running ones, and any taken over whose chunk never came
            ids = [*self.jobs.values(), *(job for job, _ in self.adoptable.values())]
            self.adoptable.clear()
        if ids:
            _slurm("scancel", *ids)


def _succeeded(outcome: Path) -> bool:
    """The task wrote an outcome of status 0: the chunk is done, its output committed (one that
    failed waits for Slurm's state: OUT_OF_MEMORY makes it an OOM kill, to split)."""
    try:
        return int(json.loads(outcome.read_text())["status"]) == 0
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _outcome(job_id: str, state: str | None, code: str, outcome: Path) -> Outcome:
    """The chunk's own outcome (its supervisor's words), else Slurm's: a job its memory limit
    killed is an OOM kill, split as any other."""
    for _ in range(20):  # a shared folder may show the file a moment after the job ended
        if outcome.exists():
            o = Outcome(**json.loads(outcome.read_text()))
            if state == "OUT_OF_MEMORY" and not o.oom:
                o = dataclasses.replace(o, oom=True)
            return o
        if state != "COMPLETED":
            break
        time.sleep(0.1)
    if state == "OUT_OF_MEMORY":
        return Outcome(137, f"Slurm's job memory limit killed it (job {job_id}: "
                            f"OUT_OF_MEMORY)", oom=True)
    return Outcome(1, f"the Slurm job {job_id} ended {state or 'unseen'} (exit code {code or '?'})"
                      f" before the chunk wrote its outcome; its log: the job's --output file")


class SlurmBackend:
    name = "slurm"
    on_this_host = False  # chunks run on the cluster's nodes
    flags = FLAGS

    def __init__(self, p: Prepared, folder: Path, items: list[str] | None,
                 options: dict[str, Any]) -> None:
        runtime = options.get("runtime")
        engine = get_engine(runtime) if runtime is not None else first_that(
            "runs_host_processes")
        if not engine.runs_host_processes:
            raise LauncherError(f"--backend slurm runs each chunk natively in its Slurm job "
                                f"under launcher's supervisor; --runtime {runtime} is for "
                                f"--backend local")
        if shutil.which("sbatch") is None:
            raise LauncherError("--backend slurm needs Slurm's sbatch on PATH (Debian: "
                                "apt-get install slurm-client; scripts/slurm-up.sh starts a "
                                "one-node cluster of its own: export the SLURM_CONF it prints)")
        given = {k: str(v) for k, v in options.items() if k in FLAGS}
        self.concurrency = max(1, p.plan.concurrency)
        self._executor = SlurmExecutor(p, folder, items, given, engine.name)
        self.taken_over = self._executor.take_over()  # what a killed launcher left running

    def slots(self) -> list[Slot]:
        return [Slot(f"slurm{i}", None) for i in range(self.concurrency)]

    def executor(self) -> SlurmExecutor:
        return self._executor

    def concurrency_note(self) -> str:
        asked = self._executor.asked()
        each = f"--cpus-per-task={asked['cpus']}" + (f" --mem={asked['mem']}" if asked["mem"]
                                                     else "")
        note = (f"Slurm: up to {self.concurrency} jobs at once (`{self._executor.name}`, "
                f"each {each})")
        peak = self._executor.p.plan.peak_bytes
        mem = _mebibytes(asked["mem"] or "")
        if peak and mem is not None and mem * 2**20 < int(peak):
            note += (f"; its --mem={asked['mem']} is below the profile's workers.memory "
                     f"({-(-int(peak) // 2**20)}M): the job's limit binds")
        if self.taken_over:
            note += (f"; taken over from a killed launcher, not submitted again: Slurm job(s) "
                     f"{', '.join(self.taken_over)}")
        return note

    @staticmethod
    def external_state(folder: Path, job: str, launcher_running: bool) -> dict[str, Any]:
        """`jobs status`: each chunk's Slurm job and its state as Slurm has it, the jobs of
        this launcher job still queued or running, and lines that say so."""
        return slurm_state(folder, f"launcher-{job}", launcher_running)

    def close(self) -> None:
        self._executor.stop_all()


def _recorded(folder: Path) -> dict[int, str]:
    """chunk -> its last Slurm job, from FOLDER/slurm/jobs.jsonl."""
    return {c: job for c, (job, _) in _recorded_outcomes(folder / "slurm" / JOBS_FILE).items()}


def _recorded_outcomes(index: Path) -> dict[int, tuple[str, str | None]]:
    """chunk -> its last Slurm job and that job's outcome file (None in an older line)."""
    out: dict[int, tuple[str, str | None]] = {}
    try:
        text = index.read_text()
    except OSError:
        return out
    for line in text.splitlines():
        try:
            rec = json.loads(line)
            out[int(rec["chunk"])] = (str(rec["job"]), rec.get("outcome"))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # a line a killed launcher left half-written
    return out


def _table(done: subprocess.CompletedProcess[str], width: int) -> dict[str, list[str]]:
    """`|`-separated rows (squeue -o, sacct -P), by their first field."""
    rows = [line.split("|") for line in done.stdout.splitlines()]
    return {r[0]: r for r in rows if len(r) >= width and r[0]}


def squeue_states(name: str) -> dict[str, dict[str, str]]:
    """job id -> state and reason, for the jobs named `name` the controller still knows
    (queued, running, and those that ended less than MinJobAge ago)."""
    done = _slurm("squeue", "-h", "-t", "all", f"--name={name}", "-o", "%i|%T|%r")
    if done.returncode != 0:
        raise LauncherError(f"squeue failed: {(done.stderr or done.stdout).strip()[:200]}")
    return {i: {"state": r[1], "source": "squeue"}
            | ({"reason": r[2]} if r[2] not in ("", "None") else {})
            for i, r in _table(done, 3).items()}


def sacct_states(ids: list[str]) -> dict[str, dict[str, str]]:
    """job id -> state and exit code for jobs the controller forgot: from accounting where
    it is on (`sacct`), else from the jobcomp file (`sacct -c`, JobCompType=jobcomp/filetxt)."""
    if not ids or shutil.which("sacct") is None:
        return {}
    fields = ["-n", "-P", "-o", "JobID,State,ExitCode", "-j", ",".join(ids)]
    out: dict[str, dict[str, str]] = {}
    for argv, source in ((["sacct", "-X", *fields], "sacct"),
                         (["sacct", "-c", *fields], "sacct -c")):
        with contextlib.suppress(LauncherError):
            done = _slurm(*argv)
            for i, r in _table(done, 3).items():  # "CANCELLED by 0": its first word
                if i in ids and i not in out:
                    out[i] = {"state": r[1].split()[0] if r[1] else "", "exit_code": r[2],
                              "source": source}
        if len(out) == len(ids):
            break
    return out


def slurm_state(folder: Path, name: str, launcher_running: bool) -> dict[str, Any]:
    """What `jobs status` shows of a job's Slurm jobs (`external_state`)."""
    recorded = _recorded(folder)
    data: dict[str, Any] = {"backend": "slurm", "name": name, "chunks": [], "active": [],
                            "lines": []}
    if shutil.which("squeue") is None:
        data["error"] = "no squeue on PATH"
        data["lines"] = [f"Slurm: not read ({data['error']}); {len(recorded)} chunks were "
                         f"Slurm jobs (FOLDER/slurm/{JOBS_FILE})"]
        return data
    try:
        known = squeue_states(name)
    except LauncherError as exc:
        data["error"] = str(exc)
        data["lines"] = [f"Slurm: not read ({exc})"]
        return data
    known.update(sacct_states(sorted(set(recorded.values()) - set(known), key=int)))
    chunk_of = {job: chunk for chunk, job in recorded.items()}
    for chunk, job in sorted(recorded.items()):
        data["chunks"].append({"chunk": chunk, "job": job, **known.get(
            job, {"state": "UNKNOWN", "source": "forgotten by Slurm"})})
    for job, st in sorted(known.items(), key=lambda kv: int(kv[0].split("_")[0])):
        if st["state"] in ACTIVE:  # by name: also a job submitted as its launcher died
            data["active"].append({"job": job, "chunk": chunk_of.get(job), **st})
    counts: dict[str, int] = {}
    for c in data["chunks"]:
        counts[c["state"]] = counts.get(c["state"], 0) + 1
    lines = [f"Slurm (`{name}`): " + (", ".join(f"{n} {s}" for s, n in sorted(
        counts.items(), key=lambda kv: -kv[1])) or "no jobs recorded")
        + " (each chunk's last job)"]
    for a in data["active"][:SHOWN]:
        why = f" ({a['reason']})" if a.get("reason") else ""
        lines.append(f"  Slurm job {a['job']}: {a['state']}{why}, "
                     + (f"chunk {a['chunk']}" if a["chunk"] is not None else "chunk unrecorded"))
    if len(data["active"]) > SHOWN:
        lines.append(f"  ... and {len(data['active']) - SHOWN} more")
    if data["active"] and not launcher_running:
        lines.append(f"Slurm still has {len(data['active'])} job(s) of this job queued or "
                     f"running though no launcher runs it (killed?), and no launcher will "
                     f"record how they end: rerunning the job (the command above) records the "
                     f"chunks that finished by then as done and takes over the jobs still "
                     f"queued or running (not submitted again); `scancel --name={name}` "
                     f"cancels them alone")
    data["lines"] = lines
    return data


def _directive(option: str) -> str:
    """An #SBATCH line's option: sbatch reads these lines itself, not a shell, so a value
    with a space or a quote could not be said there."""
    if any(c.isspace() or c in "'\"\\" for c in option):
        raise LauncherError(f"jobs render --target slurm: {option!r} cannot go on an #SBATCH "
                            f"line (a space or a quote); use a folder whose path has none")
    return option


class SlurmTarget:
    """`launcher jobs render --target slurm --out DIR`: the job as one sbatch array script,
    a task per chunk (at most the plan's concurrency at once), each task the chunk's caps and
    its payload beside the script; no driver, so no OOM split (a killed task fails; `jobs run
    --backend slurm` splits)."""

    name = "slurm"
    description = "an sbatch array script, a task per chunk"

    def check(self, options: JobRenderOptions) -> None:
        return None

    def render(self, job: Any, options: JobRenderOptions) -> RenderedJob:
        p: Prepared = job
        out = options.out.resolve()
        gpus = 1 if p.plan.gpus and p.plan.gpus[0] is not None else 0
        base = payload_base(p, out / "results", gpus, first_that("runs_host_processes").name)
        files = {}
        for i, (start, end) in enumerate(p.plan.chunks):
            chunk = Chunk(i, start, end)
            files[f"chunk-{i:05d}.json"] = json.dumps(
                {**base, "chunk": dataclasses.asdict(chunk), "items": None})
        name = f"launcher-{p.spec.name}"
        task = shlex.join([sys.executable, "-m", "launcher.jobs.slurm_task"])
        at_once = p.plan.job_concurrency
        lines = ["#!/bin/bash",
                 f"# Rendered by launcher for job {json.dumps(p.spec.name)}: "
                 f"{len(p.plan.chunks)} chunks, at most {at_once} at once; `sbatch` this file.",
                 *(f"#SBATCH {_directive(o)}" for o in (
                     f"--job-name={name}", f"--array=0-{len(p.plan.chunks) - 1}%{at_once}",
                     f"--output={out / 'slurm-%A_%a.log'}", *sbatch_options(p, gpus, {}))),
                 "set -eu",
                 f"chunk={shlex.quote(str(out))}/chunk-$(printf %05d \"$SLURM_ARRAY_TASK_ID\")",
                 f'exec {task} "$chunk.json" "$chunk.outcome.json"']
        script = f"{name}.sbatch"
        files[script] = "\n".join(lines) + "\n"
        return RenderedJob(files=files, lines=[
            f"wrote {out / script} and {len(p.plan.chunks)} chunk payloads: "
            f"`sbatch {shlex.quote(str(out / script))}`; results in {out / 'results'}"],
            data={"script": str(out / script), "chunks": len(p.plan.chunks)})


TARGET = SlurmTarget()
