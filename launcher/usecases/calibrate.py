"""`launcher calibrate`: each installed framework's peak thread count measured on this host at
several CPU counts (a child process: launcher.workloads.calibrate), kept where `plan` and `run`
find it, beside the built-in model's figure for the same probe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.errors import LauncherError
from launcher.flags import Flag, flag


@dataclass(frozen=True, kw_only=True)
class CalibrateRequest:
    frameworks: tuple[str, ...] = flag(Flag(
        ("--framework", "-f"), "A framework to measure (default: every one installed). "
        "Repeatable.", metavar="${frameworks}", repeat=True), ())
    cpus: str | None = flag(Flag(("--cpus",), "CPU counts to measure at, e.g. 1,2 (default: "
                                              "1, 2, 4 ... all)."))
    no_gpu: bool = flag(Flag(("--no-gpu",), "Measure with no GPU visible only (by default a "
                             "host with a GPU is measured again with one visible: the GPU "
                             "side).", kind="bool"), False)
    show_progress: bool = True  # the measuring process's lines on stderr


@dataclass(frozen=True, kw_only=True)
class CalibrateResult:
    file: Path
    entries: list[dict[str, Any]]  # each with "model": the built-in model's figure


def calibrate(req: CalibrateRequest) -> CalibrateResult:
    from launcher.caps.threads import estimate_threads
    from launcher.frameworks import names as framework_names
    from launcher.frameworks.base import Installed, Settings
    from launcher.probe.calibration import user_path
    from launcher.shipped import pythonpath

    for fw in req.frameworks:
        if fw not in framework_names():
            raise LauncherError(f"--framework must be one of {', '.join(framework_names())} "
                                f"(got {fw!r})")
    if req.cpus:
        from launcher.workloads.calibrate import cpu_counts

        try:
            cpu_counts(req.cpus)
        except ValueError as exc:
            raise LauncherError(str(exc)) from None
    out = user_path()
    cmd = [sys.executable, "-m", "launcher.workloads.calibrate", "--out", str(out)]
    if req.frameworks:
        cmd += ["--frameworks", ",".join(req.frameworks)]
    if req.cpus:
        cmd += ["--cpus", req.cpus]
    if req.no_gpu:
        cmd.append("--no-gpu")
    env = {**os.environ, "PYTHONPATH": pythonpath(os.environ.get("PYTHONPATH"))}
    proc = subprocess.run(cmd, env=env, stdout=sys.stderr if req.show_progress else
                          subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise LauncherError(f"calibration failed: "
                            f"{(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    try:
        entries = json.loads(out.read_text())["entries"]
    except (OSError, ValueError, KeyError):
        entries = []  # no framework measured (none installed, or none at these CPU counts)
    for e in entries:
        model = estimate_threads(e["framework"], Settings.of(e["settings"]), cpus=e["cpus"],
                                 gpus=e.get("gpus", 0),
                                 installed=Installed(e["version"], e.get("build", "unknown")),
                                 probe_only=True)  # what the probe reaches, as it ran
        e["model"] = model.per_process
    return CalibrateResult(file=out, entries=entries)
