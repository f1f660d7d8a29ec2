"""`launcher calibrate`: measure each installed framework's peak thread count on this host, at
several CPU counts, and keep it where `plan` and `run` find it."""

from __future__ import annotations

import json
import subprocess
import sys

from launcher.cli.output import print_json, table
from launcher.errors import LauncherError


def calibrate(frameworks: list[str] | None, cpus: str | None, as_json: bool,
              no_gpu: bool = False) -> int:
    from launcher.caps.threads import estimate_threads
    from launcher.frameworks import names as framework_names
    from launcher.frameworks.base import Installed, Settings
    from launcher.probe.calibration import user_path

    for fw in frameworks or []:
        if fw not in framework_names():
            raise LauncherError(f"--framework must be one of {', '.join(framework_names())} "
                                f"(got {fw!r})")
    if cpus:
        from launcher.workloads.calibrate import cpu_counts

        try:
            cpu_counts(cpus)
        except ValueError as exc:
            raise LauncherError(str(exc)) from None
    out = user_path()
    cmd = [sys.executable, "-m", "launcher.workloads.calibrate", "--out", str(out)]
    if frameworks:
        cmd += ["--frameworks", ",".join(frameworks)]
    if cpus:
        cmd += ["--cpus", cpus]
    if no_gpu:
        cmd.append("--no-gpu")
    import os

    from launcher.shipped import pythonpath

    env = {**os.environ, "PYTHONPATH": pythonpath(os.environ.get("PYTHONPATH"))}
    proc = subprocess.run(cmd, env=env, stdout=sys.stderr if not as_json else
                          subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise LauncherError(f"calibration failed: "
                            f"{(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    try:
        entries = json.loads(out.read_text())["entries"]
    except (OSError, ValueError, KeyError):
        entries = []  # no framework measured (none installed, or none at these CPU counts)
    rows = []
    for e in entries:
        model = estimate_threads(e["framework"], Settings.of(e["settings"]), cpus=e["cpus"],
                                 gpus=e.get("gpus", 0),
                                 installed=Installed(e["version"], e.get("build", "unknown")),
                                 probe_only=True)  # what the probe reaches, as it ran
        e["model"] = model.per_process
        gpu = f"{e['gpus']} {e.get('vendor', '')}".strip() if e.get("gpus") else "-"
        rows.append((e["framework"], str(e["version"]), str(e["cpus"]), gpu, str(e["peak"]),
                     str(model.per_process), f"{e['peak'] - model.per_process:+d}", e["date"]))
    if as_json:
        print_json({"file": str(out), "entries": entries})
        return 0
    print(table([("framework", "version", "CPUs", "GPU", "peak", "model", "offset", "date"),
                 *rows]))
    print(f"saved in {out}: `launcher plan` and `run` use it for these versions and CPU counts "
          f"(source: calibrated on this host); model: the built-in model's figure for the probe, "
          f"whose few steps never grow some pools a real program does (those stay in every "
          f"estimate)")
    return 0
