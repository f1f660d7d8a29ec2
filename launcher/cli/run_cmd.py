"""`launcher run WORKLOAD [ARGS] | -- CMD...`: a capped workload (container or native process),
streamed, watched by telemetry, its exit status passed on."""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from launcher.caps.resolve import Resolved, resolve
from launcher.cli.common import default_tag
from launcher.cli.output import parse_env_pairs, print_json
from launcher.errors import LauncherError
from launcher.runtime.engine import Engine, RunResult, Started
from launcher.runtime.engines import choose_engine
from launcher.runtime.spec import Mount, RunSpec, build_spec


def say(msg: str) -> None:
    print(f"launcher: {msg}", file=sys.stderr, flush=True)


def runs_dir() -> Path:
    return Path(os.environ.get("LAUNCHER_RUNS_DIR") or "runs")


def run(command: list[str], profile: str, framework: str | None, processes: int | None,
        runtime: str, image: str | None, gpus: str | None, env: list[str] | None,
        dry_run: bool, as_json: bool, host_root: Path | None, name: str | None,
        interval: float = 1.0) -> int:
    from launcher.probe import probe_host
    from launcher.profiles import load_profile
    from launcher.workloads.catalog import find

    if not command:
        raise LauncherError("nothing to run: give a workload (see `launcher workloads`) or a "
                            "command after --, e.g. `launcher run -- python3 -c 'import numpy'`")
    overrides = parse_env_pairs(env)
    workload = find(command[0])
    if workload is not None and {"-h", "--help"} & set(command[1:]):
        parser = workload.parser()
        if parser is not None:
            print(parser.format_help(), end="")
            return 0
    prof = load_profile(profile)
    fw = framework or (workload.framework if workload else None) or prof.get("framework", "none")
    image = image or default_tag(prof.name, fw)
    engine, note = choose_engine(runtime, image, check_image=not dry_run)
    if note:
        say(note)
    if workload is not None:
        command = workload.argv(command[1:], engine.python)
    facts = probe_host(host_root or "/")
    r = resolve(prof, facts, fw, processes, overrides, gpus,
                facts.env if engine.inherits_environment else {}, clamp=True)
    run_id = name or _run_id(workload.name if workload else command[0])
    spec = build_spec(r, command, image, name=name if dry_run else run_id)
    if workload is not None and workload.module:
        _workload_paths(spec, runs_dir() / run_id)
    if dry_run:
        if r.selection.shortfall:
            say(f"warning: {r.selection.shortfall} (a real run refuses)")
        request = engine.describe(spec)
        if as_json:
            print_json({"runtime": engine.name, "spec": spec.to_json(), "request": request})
        else:
            _print_request(engine.name, request)
        return 0
    if r.selection.shortfall:
        raise LauncherError(r.selection.shortfall)
    if r.caps.verdict.level == "refuse":
        raise LauncherError("refused: " + " ".join(r.caps.verdict.reasons) +
                            " (see `launcher plan`)")
    from launcher.supervise.report import report

    report(r.caps, False, say)
    run_dir = runs_dir() / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    return _supervised_run(engine, spec, r, run_dir, command, interval)


def _run_id(what: str) -> str:
    slug = "".join(c if c.isalnum() or c in "-_" else "-" for c in Path(what).name)[:24]
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{slug or 'run'}-{uuid.uuid4().hex[:4]}"


def _workload_paths(spec: RunSpec, run_dir: Path) -> None:
    """Built-in workloads import launcher and write into the run folder: the runs folder is
    mounted at its own path, so paths read the same inside and out."""
    runs = str(runs_dir().resolve())
    spec.imports_launcher = True
    spec.mounts.append(Mount(runs, runs))
    spec.env["LAUNCHER_RUNS_DIR"] = runs
    spec.env["LAUNCHER_RUN_DIR"] = str(run_dir.resolve())


class _Diagnosis:
    """Passes output through and keeps the supervisor's last `launcher: the ...` sentence."""

    def __init__(self) -> None:
        self.partial = b""
        self.sentence = ""

    def sink(self, stream: str, data: bytes) -> None:
        target = sys.stdout.buffer if stream == "stdout" else sys.stderr.buffer
        target.write(data)
        target.flush()
        if stream != "stderr":
            return
        *lines, self.partial = (self.partial + data).split(b"\n")
        for raw in lines:
            line = raw.decode(errors="replace")
            if line.startswith("launcher: the "):
                self.sentence = line[len("launcher: "):]


def _supervised_run(engine: Engine, spec: RunSpec, r: Resolved, run_dir: Path,
                    command: list[str], interval: float) -> int:
    from launcher.telemetry.sampler import Sampler
    from launcher.telemetry.watch import limits_of

    started = time.time()
    samplers: list[Sampler] = []
    watch = _Diagnosis()
    telemetry = (run_dir / "telemetry.jsonl").open("w")

    def on_start(info: Started) -> None:
        say(f"{engine.name} run; {info.enforcement.sentence()}")
        if info.pid is None:
            return
        limits, pids_dir = limits_of(info.pid, r.facts)
        s = Sampler(info.pid, telemetry, limits, pids_dir, interval,
                    warn=lambda msg: say(f"warning: {msg}"))
        s.start()
        samplers.append(s)

    try:
        result = engine.run(spec, watch.sink, on_start)
    finally:
        for s in samplers:
            s.stop()
        telemetry.close()
    diagnosis = watch.sentence or f"the workload exited with status {result.status}."
    _write_summary(run_dir, r, engine, result, command, diagnosis, started)
    say(f"run {run_dir.name}: telemetry, summary and plot in {run_dir}/ "
        f"(`launcher report {run_dir}`)")
    return result.status


def _write_summary(run_dir: Path, r: Resolved, engine: Engine, result: RunResult,
                   command: list[str], diagnosis: str, started: float) -> None:
    from launcher.telemetry.summary import plot, read_series, summarize

    rows = read_series(run_dir / "telemetry.jsonl")
    e = result.enforcement
    meta = {"run_id": run_dir.name, "profile": r.caps.profile, "framework": r.framework,
            "runtime": engine.name, "command": command, "exit_status": result.status,
            "diagnosis": diagnosis, "started": started, "ended": time.time(),
            "threads_estimate": r.caps.estimate,
            "engine": {"enforced": e.enforced, "advisory": e.advisory}}
    summary = summarize(rows, meta)
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if len(rows) < 2:  # one sample draws no series, and matplotlib costs ~1 s to import
        return
    if not plot(rows, run_dir / "telemetry.png", f"{run_dir.name}: {diagnosis}"):
        say("matplotlib is not installed: no telemetry.png (pip install matplotlib)")


def _print_request(runtime: str, request: dict[str, Any]) -> None:
    print(f"{runtime}: {json.dumps(request, indent=2)}")
