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

from launcher.caps.plan import clamp_ulimits
from launcher.cli.common import default_tag, prepare
from launcher.cli.output import print_json
from launcher.errors import LauncherError
from launcher.runtime.engine import Engine, get_engine
from launcher.runtime.spec import container_spec

PACKAGE = Path(__file__).resolve().parents[1]
RUNTIMES = ("auto", "docker", "native")


def say(msg: str) -> None:
    print(f"launcher: {msg}", file=sys.stderr, flush=True)


def runs_dir() -> Path:
    return Path(os.environ.get("LAUNCHER_RUNS_DIR") or "runs")


def run(command: list[str], profile: str, framework: str | None, processes: int | None,
        runtime: str, image: str | None, gpus: str | None, env: list[str] | None,
        dry_run: bool, as_json: bool, host_root: Path | None, name: str | None,
        interval: float = 1.0) -> int:
    from launcher.workloads.catalog import find, python_for

    if not command:
        raise LauncherError("nothing to run: give a workload (see `launcher workloads`) or a "
                            "command after --, e.g. `launcher run -- python3 -c 'import numpy'`")
    if runtime not in RUNTIMES:
        raise LauncherError(f"--runtime must be one of {', '.join(RUNTIMES)} (got {runtime!r})")
    engine: Engine | None = None
    if runtime == "auto":
        engine = get_engine("auto")
        runtime = engine.name if engine.name in ("docker", "native") else "docker"
    workload = find(command[0])
    if (runtime == "docker" and engine is not None and engine.name == "docker" and not image
            and not dry_run):
        from launcher.profiles import load_profile

        prof = load_profile(profile)
        wanted = default_tag(prof.name, framework or (workload.framework if workload else None)
                             or prof.get("framework", "none"))
        if not _image_exists(wanted):
            say(f"no image {wanted} (build one with `launcher build`); running natively")
            runtime, engine = "native", get_engine("native")
    if workload is not None:
        framework = framework or workload.framework
        command = workload.argv(command[1:], python_for(runtime))
    p = prepare(profile, framework, processes, env, gpus, host_root,
                inherit_shell=runtime == "native")
    clamp_ulimits(p.caps, p.facts)
    run_id = name or f"{time.strftime('%Y%m%d-%H%M%S')}-{_slug(workload.name if workload else command[0])}-{uuid.uuid4().hex[:4]}"  # noqa: E501
    spec = container_spec(p.caps, p.choice, p.facts, image or default_tag(p.profile.name,
                          p.framework), command, mount_supervisor=str(PACKAGE),
                          name=name if dry_run else run_id)
    run_dir = runs_dir() / run_id
    if workload is not None and workload.module:
        _workload_env(spec, runtime, run_dir)
    if dry_run:
        if as_json:
            print_json(spec)
        else:
            _print_spec(spec)
        return 0
    if p.caps.verdict.level == "refuse":
        raise LauncherError("refused: " + " ".join(p.caps.verdict.reasons) +
                            " (see `launcher plan`)")
    from launcher.supervise.report import report

    report(p.caps, False, say)
    engine = engine or get_engine(runtime)
    run_dir.mkdir(parents=True, exist_ok=True)
    if engine.name == "native":
        spec["environment"]["LAUNCHER_DIAGNOSIS_FILE"] = str((run_dir / "diagnosis.txt")
                                                             .resolve())
    return _supervised_run(engine, spec, p, run_dir, command, interval)


def _image_exists(tag: str) -> bool:
    from launcher.runtime.docker_api import ApiError, DockerAPI

    try:
        DockerAPI().request("GET", f"/images/{tag}/json")
        return True
    except ApiError:
        return False


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in Path(text).name)[:24] or "run"


def _workload_env(spec: dict[str, Any], runtime: str, run_dir: Path) -> None:
    """Built-in workloads import launcher and write results: give them both."""
    env = spec["environment"]
    if runtime == "docker":
        env["PYTHONPATH"] = "/opt/launcher"
        spec.setdefault("volumes", {})[str(runs_dir().resolve())] = {"bind": "/runs",
                                                                      "mode": "rw"}
        env["LAUNCHER_RUNS_DIR"] = "/runs"
        env["LAUNCHER_RUN_DIR"] = f"/runs/{run_dir.name}"
    else:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(PACKAGE.parent), *filter(None, [os.environ.get("PYTHONPATH")])])
        env["LAUNCHER_RUNS_DIR"] = str(runs_dir().resolve())
        env["LAUNCHER_RUN_DIR"] = str(run_dir.resolve())


def _supervised_run(engine: Engine, spec: dict[str, Any], p: Any, run_dir: Path,
                    command: list[str], interval: float) -> int:
    from launcher.telemetry.sampler import Sampler
    from launcher.telemetry.watch import limits_of

    started = time.time()
    samplers: list[Sampler] = []
    last_line = {"text": ""}
    out, err = sys.stdout.buffer, sys.stderr.buffer
    telemetry = (run_dir / "telemetry.jsonl").open("w")

    def sink(stream: str, data: bytes) -> None:
        target = out if stream == "stdout" else err
        target.write(data)
        target.flush()
        if stream == "stderr":
            for line in data.decode(errors="replace").splitlines():
                if line.startswith("launcher: "):
                    last_line["text"] = line[len("launcher: "):]

    def on_start(pid: int) -> None:
        limits, pids_dir = limits_of(pid, p.facts)
        s = Sampler(pid, telemetry, limits, pids_dir, interval,
                    warn=lambda msg: say(f"warning: {msg}"))
        s.start()
        samplers.append(s)

    try:
        status = engine.run(spec, sink, on_start)
    finally:
        for s in samplers:
            s.stop()
        telemetry.close()
    diagnosis = _diagnosis(run_dir, last_line["text"], status)
    _write_summary(run_dir, p, engine, command, status, diagnosis, started)
    say(f"run {run_dir.name}: telemetry, summary and plot in {run_dir}/ "
        f"(`launcher report {run_dir}`)")
    return status


def _diagnosis(run_dir: Path, streamed: str, status: int) -> str:
    f = run_dir / "diagnosis.txt"
    if f.exists():
        return f.read_text().strip()
    if streamed.startswith("the "):
        return streamed
    return f"the workload exited with status {status}."


def _write_summary(run_dir: Path, p: Any, engine: Engine, command: list[str], status: int,
                   diagnosis: str, started: float) -> None:
    from launcher.telemetry.summary import plot, read_series, summarize

    rows = read_series(run_dir / "telemetry.jsonl")
    meta = {"run_id": run_dir.name, "profile": p.profile.name, "framework": p.framework,
            "runtime": engine.name, "command": command, "exit_status": status,
            "diagnosis": diagnosis, "started": started, "ended": time.time(),
            "threads_estimate": p.caps.estimate, "engine": engine.notes}
    summary = summarize(rows, meta)
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if len(rows) < 2:  # one sample draws no series, and matplotlib costs ~1 s to import
        return
    if not plot(rows, run_dir / "telemetry.png", f"{run_dir.name}: {diagnosis}"):
        say("matplotlib is not installed: no telemetry.png (pip install matplotlib)")


def _print_spec(spec: dict) -> None:  # type: ignore[type-arg]
    for key, value in spec.items():
        if key == "environment":
            print("environment:")
            for k, v in value.items():
                print(f"  {k}={v}")
        else:
            print(f"{key}: {value}")
