"""`python -m launcher.workloads.calibrate [--frameworks jax,tf] [--cpus 1,2] [--out FILE]`:
measure each installed framework's peak thread count on this host (threadprobe --peak: start,
import, a first operation, compiled training steps), at several CPU counts by affinity, under
the thread settings the caps give for that many CPUs, with no GPU visible and, where this host
has GPUs, again with one visible (per vendor and driver); write them where the caps read them.

Standard library only (it also runs inside an image's build, where PyYAML may be missing): the
settings are the `auto` caps of a CPU count, written out, and recorded with each peak.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from launcher.frameworks import get as get_framework
from launcher.frameworks import names as framework_names
from launcher.probe.calibration import METHOD
from launcher.shipped import pythonpath
from launcher.vendors import every_gpu_hidden, gpu_vendors
from launcher.vendors.base import Gpu, Vendor

# the CPU side: no GPU of any vendor visible, hidden as a run hides them (not JAX_PLATFORMS=cpu,
# which also keeps a CUDA build's plugin, and its `cuda` thread, from starting)
HIDDEN = every_gpu_hidden()


def probe_environment(cpus: int) -> dict[str, str | None]:
    """The `auto` caps of this many CPUs, written out: the shared pools sized for them, and
    every registered framework's own variables from the same pools (intra-op N, inter-op
    min(2, N)), as each framework's `environment` gives them. None: removed."""
    from launcher.frameworks.base import Pools

    def pick(_key: str, auto: int, why: str) -> tuple[int, str]:
        return auto, why

    pools = Pools(intra=cpus, intra_src="calibration", inter=min(2, cpus),
                  inter_src="calibration", pick=pick, get=lambda _key: None,
                  src=lambda _key: "calibration")
    env: dict[str, str | None] = {
        "OMP_NUM_THREADS": str(cpus), "MKL_NUM_THREADS": str(cpus),
        "OPENBLAS_NUM_THREADS": str(cpus), "GOTO_NUM_THREADS": str(cpus)}
    for name in framework_names():
        env.update({var: value for var, (value, _) in
                    get_framework(name).environment(pools).items()})
    return env


def settings_for(cpus: int) -> dict[str, int]:
    """The settings the probe runs under at this many CPUs, as an entry records them: the
    shared pools, and what each framework's variables feed back (its `settings_from`)."""
    env = probe_environment(cpus)
    out = {"omp": cpus, "blas": cpus, "intra": cpus, "inter": min(2, cpus)}
    for name in framework_names():
        for key, var in get_framework(name).settings_from.items():
            value = env.get(var)
            if value is not None and value.isdigit():
                out[key] = int(value)
    return out


def first_gpu() -> tuple[Vendor, Gpu] | None:
    """The first GPU this host shows, and its vendor."""
    for vendor in gpu_vendors():
        found = vendor.detect(Path("/"), use_tools=True)
        if found:
            return vendor, found[0]
    return None


def measure(framework: str, cpus: list[int],
            gpu: tuple[Vendor, Gpu] | None = None) -> dict[str, Any]:
    """One peak: with no GPU visible, or with exactly `gpu` visible (the GPU side). A peak
    below the built-in model's figure for the probe lowers every estimate made from it, so
    it is measured again and the higher kept: a probe that missed a short-lived thread once
    never lowers an estimate below a real peak."""
    entry = _probe_peak(framework, cpus, gpu)
    if entry["peak"] < _model(framework, len(cpus), gpus=1 if gpu else 0):
        again = _probe_peak(framework, cpus, gpu)
        entry = max(entry, again, key=lambda e: e["peak"])
        entry["probes"] = 2
    return entry


def _model(framework: str, cpus: int, *, gpus: int) -> int:
    """The built-in model's figure for what the probe reaches at `auto` caps of `cpus`."""
    from launcher.caps.threads import estimate_threads
    from launcher.frameworks.base import Settings

    return estimate_threads(framework, Settings.of(settings_for(cpus)), cpus=cpus, gpus=gpus,
                            installed=get_framework(framework).installed(),
                            probe_only=True).per_process


def _probe_peak(framework: str, cpus: list[int],
                gpu: tuple[Vendor, Gpu] | None) -> dict[str, Any]:
    s = settings_for(len(cpus))
    visible = gpu[0].visible((gpu[1].index,)) if gpu else HIDDEN
    caps = probe_environment(len(cpus))
    env = {**{k: v for k, v in os.environ.items() if k not in HIDDEN and k not in caps},
           **{k: v for k, v in caps.items() if v is not None},
           "TF_CPP_MIN_LOG_LEVEL": "3", **visible,
           "PYTHONPATH": pythonpath(os.environ.get("PYTHONPATH"))}
    proc = subprocess.run([sys.executable, "-m", "launcher.workloads.threadprobe", "--peak",
                           framework], env=env, capture_output=True, text=True, timeout=900,
                          preexec_fn=lambda: os.sched_setaffinity(0, set(cpus)))
    if proc.returncode != 0:
        raise RuntimeError(f"{framework} at {len(cpus)} CPUs: "
                           f"{(proc.stderr.strip().splitlines() or ['failed'])[-1]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    installed = get_framework(framework).installed()
    entry: dict[str, Any] = {
        "framework": framework, "version": installed.version, "build": installed.build,
        "cpus": len(cpus), "peak": out["peak"], "peak_names": out["peak_names"],
        "settings": s, "gpus": 0, "host": socket.gethostname(),
        "date": time.strftime("%Y-%m-%d"), "method": METHOD}
    if gpu:
        entry.update(gpus=1, vendor=gpu[0].name, model=gpu[1].model,
                     driver=gpu[0].driver_version(Path("/")))
    return entry


def counts(available: int) -> list[int]:
    """1, 2, 4, ... up to the CPUs in this process's affinity, and that number."""
    out, n = [], 1
    while n < available:
        out.append(n)
        n *= 2
    return [*out, available]


def save(path: Path, entries: list[dict[str, object]]) -> None:
    """Merge into the file: an entry replaces one for the same framework, version and CPUs."""
    try:
        old = json.loads(path.read_text()).get("entries", [])
    except (OSError, ValueError, AttributeError):
        old = []
    def key(e: dict[str, object]) -> tuple[object, ...]:
        return tuple(e.get(k) for k in ("framework", "version", "cpus", "host", "gpus"))

    new = {key(e) for e in entries}
    kept = [e for e in old if key(e) not in new]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"entries": kept + entries}, indent=2) + "\n")
    os.replace(tmp, path)


def cpu_counts(text: str) -> list[int]:
    """--cpus: positive CPU counts such as 1,2,4."""
    try:
        ns = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        ns = []
    if not ns or min(ns) < 1:
        raise ValueError(f"--cpus: give positive CPU counts such as 1,2,4 (got {text!r})")
    return sorted(set(ns))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m launcher.workloads.calibrate")
    ap.add_argument("--frameworks", default=",".join(framework_names()))
    ap.add_argument("--cpus", default=None, help="CPU counts, e.g. 1,2 (default 1, 2, 4 ... "
                                                 "all)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--no-gpu", action="store_true",
                    help="measure the CPU side only, even where this host has a GPU")
    ap.add_argument("--best-effort", action="store_true",
                    help="a measurement that fails is reported and skipped (an image build)")
    args = ap.parse_args(argv)
    affinity = sorted(os.sched_getaffinity(0))
    try:
        ns = cpu_counts(args.cpus) if args.cpus else counts(len(affinity))
    except ValueError as exc:
        ap.error(str(exc))
    failed = 0
    gpu = None if args.no_gpu else first_gpu()
    for fw in args.frameworks.split(","):
        if importlib.util.find_spec(get_framework(fw).module) is None:
            print(f"calibrate: {fw} is not installed; skipped", flush=True)
            continue
        for n in ns:
            if n > len(affinity):
                print(f"calibrate: {fw} at {n} CPUs: only {len(affinity)} here; skipped",
                      flush=True)
                continue
            for side in (None, gpu) if gpu else (None,):
                where = f"{n} CPU(s)" + (f" and {side[0].label} GPU {side[1].index}"
                                         if side else "")
                try:
                    e = measure(fw, affinity[:n], side)
                except (RuntimeError, ValueError, KeyError, subprocess.TimeoutExpired) as exc:
                    failed += 1
                    print(f"calibrate: {fw} at {where} failed ({exc}); the built-in model "
                          f"stands for it", flush=True)
                    continue
                save(Path(args.out), [e])  # each as it comes: an interrupted run keeps the rest
                print(f"calibrate: {fw} {e['version']} at {where}: peak {e['peak']} threads",
                      flush=True)
    if failed and not args.best_effort:
        print(f"calibrate: {failed} measurement(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
