"""Threads and throughput under CPU quotas: framework defaults vs launcher's caps vs a sweep,
with confidence intervals, and the estimated against the observed peak threads.

    sudo python benchmarks/threads.py [--seconds 2] [--rounds 7] [--quotas 0.5,1,1.5]
                                      [--frameworks none,torch,tf,jax] [--ablate tf:1.5]

For each framework and quota, a cgroup with that CPU quota is made (as `launcher run --runtime
native` does), and fresh interpreters run a 384x384 matmul loop: with no thread variables
(defaults), with launcher's caps for a profile with `limits.cpus` = the quota, and with every
thread variable = 1..4. The configurations take turns in every round (drift hits them alike);
each ratio (caps / the best of the sweep, caps / default) is the ratio of medians with a 95%
bootstrap interval over the rounds. Another interpreter runs the caps through a few compiled
training steps (threadprobe --peak) for the observed peak threads beside the plan's estimate.
`--ablate FW:QUOTA` runs the caps less one variable at a time, to find what beyond the thread
counts moves throughput. Targets: caps >= 0.97 x best, caps >= default.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from launcher.caps.resolve import resolve  # noqa: E402
from launcher.cgroups.run_cgroup import make_run_cgroup  # noqa: E402
from launcher.probe import probe_host  # noqa: E402
from launcher.profiles import load_profile  # noqa: E402
from launcher.variables import managed  # noqa: E402
from launcher.vendors import every_gpu_hidden  # noqa: E402

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS",
               "NUMEXPR_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS",
               "PJRT_NPROC")


def probe(framework: str, env: dict[str, str], rc, seconds: float | None,  # type: ignore[no-untyped-def]
          peak: bool = False) -> dict:  # type: ignore[type-arg]
    base = {k: v for k, v in os.environ.items() if k not in managed()}
    base.update(every_gpu_hidden())  # as a native run of a profile with no GPU: none visible
    args = [framework, *([str(seconds)] if seconds else [])]
    proc = subprocess.run(
        [sys.executable, "-m", "launcher.workloads.threadprobe", *(["--peak"] if peak else []),
         *args],
        env={**base, **env, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"},
        capture_output=True, text=True, timeout=900, preexec_fn=lambda: rc.join(os.getpid()),
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def ratio_ci(num: list[float], den: list[float], n: int = 2000) -> tuple[float, float, float]:
    """median(num) / median(den) and its 95% bootstrap interval over the rounds."""
    rng = random.Random(7)
    point = statistics.median(num) / statistics.median(den)
    boots = sorted(statistics.median(rng.choices(num, k=len(num))) /
                   statistics.median(rng.choices(den, k=len(den))) for _ in range(n))
    return point, boots[int(0.025 * n)], boots[int(0.975 * n)]


def caps_for(framework: str, quota: float, facts) -> tuple[dict[str, str], dict]:  # type: ignore[no-untyped-def,type-arg]
    with tempfile.TemporaryDirectory() as d:
        prof = Path(d) / "bench.yaml"
        prof.write_text(f"extends: base\nlimits: {{cpus: {quota}}}\n")
        caps = resolve(load_profile(prof), facts, framework=framework).caps
    return caps.environment(), caps.estimate


def run_rounds(framework: str, configs: dict[str, dict[str, str]], rc, rounds: int,  # type: ignore[no-untyped-def]
               seconds: float) -> dict[str, list[float]]:
    seen: dict[str, list[float]] = {k: [] for k in configs}
    for _ in range(rounds):  # interleaved, so drift hits every configuration alike
        for key, env in configs.items():
            seen[key].append(probe(framework, env, rc, seconds)["per_s"])
    return seen


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--quotas", default="0.5,1,1.5")
    ap.add_argument("--frameworks", default="none,torch,tf,jax")
    ap.add_argument("--sweep", default="1,2,3,4")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds per configuration")
    ap.add_argument("--ablate", default=None, help="FW:QUOTA, e.g. tf:1.5")
    args = ap.parse_args()
    facts = probe_host("/", environ={})
    sweep = [int(x) for x in args.sweep.split(",")]
    print(f"host: {facts.affinity_cpus} CPUs; {args.seconds}s per measurement, {args.rounds} "
          f"interleaved rounds; iterations/s of a 384x384 matmul (medians); ratios with 95% "
          f"bootstrap intervals")
    print(f"{'framework':<9} {'quota':>5} {'default':>8} {'caps':>8} "
          + " ".join(f"{'t=' + str(n):>7}" for n in sweep)
          + f" {'best':>5} {'caps/best [95% CI]':>22} {'caps/default [95% CI]':>22} "
            f"{'peak':>5} {'est':>4}")
    for fw in args.frameworks.split(","):
        for q in (float(x) for x in args.quotas.split(",")):
            rc = make_run_cgroup(f"launcher-bench-{os.getpid()}-{fw}-{q}", pids=None, memory=None,
                                 cpus=q)
            if "cpus" not in rc.enforced:
                raise SystemExit(f"cannot set a CPU quota here: {rc.advisory.get('cpus')}")
            try:
                caps, estimate = caps_for(fw, q, facts)
                configs = {"default": {}, "caps": caps,
                           **{f"t={n}": {v: str(n) for v in THREAD_VARS} for n in sweep}}
                seen = run_rounds(fw, configs, rc, args.rounds, args.seconds)
                peak = probe(fw, caps, rc, None, peak=True)["peak"]
            finally:
                rc.cleanup()
            med = {k: statistics.median(v) for k, v in seen.items()}
            best = max((f"t={n}" for n in sweep), key=lambda k: med[k])
            rb, rb_lo, rb_hi = ratio_ci(seen["caps"], seen[best])
            rd, rd_lo, rd_hi = ratio_ci(seen["caps"], seen["default"])
            est = estimate["per_process"]
            print(f"{fw:<9} {q:>5g} {med['default']:>8.0f} {med['caps']:>8.0f} "
                  + " ".join(f"{med[f't={n}']:>7.0f}" for n in sweep)
                  + f" {best:>5} {rb:>6.2f} [{rb_lo:.2f}, {rb_hi:.2f}]{'':>4} "
                    f"{rd:>6.2f} [{rd_lo:.2f}, {rd_hi:.2f}]{'':>4} {peak:>5} {est:>4}"
                    f"{'' if peak <= est else ' ABOVE'}", flush=True)
    if args.ablate:
        ablate(args.ablate, facts, args.rounds, args.seconds)


def ablate(spec: str, facts, rounds: int, seconds: float) -> None:  # type: ignore[no-untyped-def]
    """The caps less one variable at a time (thread counts kept), against the full caps."""
    fw, q = spec.split(":")
    caps, _ = caps_for(fw, float(q), facts)
    others = [k for k in caps if k not in THREAD_VARS]
    configs = {"caps": caps, **{f"-{k}": {n: v for n, v in caps.items() if n != k}
                                for k in others},
               "threads only": {k: v for k, v in caps.items() if k in THREAD_VARS}}
    rc = make_run_cgroup(f"launcher-bench-{os.getpid()}-ablate", pids=None, memory=None,
                         cpus=float(q))
    try:
        seen = run_rounds(fw, configs, rc, rounds, seconds)
    finally:
        rc.cleanup()
    print(f"\nablation, {fw} at {q} CPUs: each configuration against the full caps")
    for key in configs:
        if key == "caps":
            continue
        r, lo, hi = ratio_ci(seen[key], seen["caps"])
        print(f"  {key:<40} {statistics.median(seen[key]):>8.0f}  x{r:.3f} [{lo:.3f}, {hi:.3f}]")


if __name__ == "__main__":
    main()
