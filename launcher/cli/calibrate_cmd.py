"""`launcher calibrate`: measure each installed framework's peak thread count on this host, at
several CPU counts, and keep it where `plan` and `run` find it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from launcher.cli.output import print_json, table
from launcher.errors import LauncherError


def calibrate(frameworks: list[str] | None, cpus: str | None, as_json: bool) -> int:
    from launcher.caps.threads import estimate_threads
    from launcher.probe.calibration import user_path
    from launcher.profiles.schema import FRAMEWORKS

    for fw in frameworks or []:
        if fw not in FRAMEWORKS:
            raise LauncherError(f"--framework must be one of {', '.join(FRAMEWORKS)} "
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
    pkg = str(Path(__file__).resolve().parents[2])
    import os

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        pkg, os.environ.get("PYTHONPATH")]))}
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
        s = e["settings"]
        model = estimate_threads(e["framework"], s["omp"], s["blas"], s["intra"], s["inter"],
                                 e["cpus"], s["private_pool"]).per_process
        e["model"] = model
        rows.append((e["framework"], str(e["version"]), str(e["cpus"]), str(e["peak"]),
                     str(model), f"{e['peak'] - model:+d}", e["date"]))
    if as_json:
        print_json({"file": str(out), "entries": entries})
        return 0
    print(table([("framework", "version", "CPUs", "peak", "model", "offset", "date"), *rows]))
    print(f"saved in {out}: `launcher plan` and `run` use it for these versions and CPU counts "
          f"(source: calibrated on this host)")
    return 0
