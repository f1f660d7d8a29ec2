"""Threads and throughput under CPU quotas: framework defaults vs launcher's caps vs a sweep.

    sudo python benchmarks/threads.py [--seconds 3] [--quotas 0.5,1,1.5]
                                      [--frameworks none,torch,tf,jax]

For each framework and quota, a cgroup with that CPU quota is made (as `launcher run --runtime
native` does), and a fresh interpreter imports the framework, runs a first op, counts its
threads, then runs a 384x384 matmul loop: with no thread variables (defaults), with launcher's
caps for a profile with `limits.cpus` = the quota, and with every thread variable = 1..4.
Prints iterations/s side by side and the ratios caps/best and caps/default, and whether the
thread count equals the plan's estimate. Targets: caps >= 0.97 x best, caps >= default.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from launcher.caps.resolve import resolve  # noqa: E402
from launcher.probe import probe_host  # noqa: E402
from launcher.profiles import load_profile  # noqa: E402
from launcher.runtime.run_cgroup import make_run_cgroup  # noqa: E402
from launcher.variables import managed  # noqa: E402

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS",
               "NUMEXPR_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")


def measure(framework: str, env: dict[str, str], rc, seconds: float) -> dict:  # type: ignore[no-untyped-def]
    base = {k: v for k, v in os.environ.items() if k not in managed()}
    proc = subprocess.run(
        [sys.executable, "-m", "launcher.workloads.threadprobe", framework, str(seconds)],
        env={**base, **env, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"},
        capture_output=True, text=True, timeout=600, preexec_fn=lambda: rc.join(os.getpid()),
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--quotas", default="0.5,1,1.5")
    ap.add_argument("--frameworks", default="none,torch,tf,jax")
    ap.add_argument("--sweep", default="1,2,3,4")
    ap.add_argument("--rounds", type=int, default=3,
                    help="interleaved rounds per configuration; the median is reported")
    args = ap.parse_args()
    facts = probe_host("/", environ={})
    sweep = [int(x) for x in args.sweep.split(",")]
    print(f"host: {facts.affinity_cpus} CPUs; {args.seconds}s per measurement, median of "
          f"{args.rounds} interleaved rounds; iterations/s of a 384x384 matmul")
    header = (f"{'framework':<9} {'quota':>5} {'default':>8} {'caps':>8} "
              + " ".join(f"{'t=' + str(n):>7}" for n in sweep)
              + f" {'best':>5} {'caps/best':>9} {'caps/def':>8} {'threads':>7} {'est':>4}")
    print(header)
    worst = []
    for fw in args.frameworks.split(","):
        for q in (float(x) for x in args.quotas.split(",")):
            rc = make_run_cgroup(f"launcher-bench-{os.getpid()}-{fw}-{q}", None, None, q)
            if "cpus" not in rc.enforced:
                raise SystemExit(f"cannot set a CPU quota here: {rc.advisory}")
            try:
                with tempfile.TemporaryDirectory() as d:
                    prof = Path(d) / "bench.yaml"
                    prof.write_text(f"extends: base\nlimits: {{cpus: {q}}}\n")
                    caps = resolve(load_profile(prof), facts, framework=fw).caps
                configs = {"default": {}, "caps": caps.environment(),
                           **{n: {v: str(n) for v in THREAD_VARS} for n in sweep}}
                seen: dict = {k: [] for k in configs}
                for _ in range(args.rounds):  # interleaved, so drift hits every config alike
                    for key, env in configs.items():
                        seen[key].append(measure(fw, env, rc, args.seconds))
                med = {k: sorted(v, key=lambda r: r["per_s"])[len(v) // 2]
                       for k, v in seen.items()}
                default, capped = med["default"], med["caps"]
                swept = {n: med[n] for n in sweep}
            finally:
                rc.cleanup()
            best_n = max(swept, key=lambda n: swept[n]["per_s"])
            best = swept[best_n]["per_s"]
            r_best, r_def = capped["per_s"] / best, capped["per_s"] / default["per_s"]
            worst.append((r_best, r_def, fw, q))
            est = caps.estimate["per_process"]
            print(f"{fw:<9} {q:>5g} {default['per_s']:>8.0f} {capped['per_s']:>8.0f} "
                  + " ".join(f"{swept[n]['per_s']:>7.0f}" for n in sweep)
                  + f" {'t=' + str(best_n):>5} {r_best:>9.2f} {r_def:>8.2f} "
                    f"{capped['threads']:>7} {est:>4}{'' if capped['threads'] == est else ' !'}",
                  flush=True)
    low_best = min(worst)
    low_def = min(worst, key=lambda w: w[1])
    print(f"lowest caps/best: {low_best[0]:.2f} ({low_best[2]} at {low_best[3]:g} CPU; "
          f"target >= 0.97); lowest caps/default: {low_def[1]:.2f} ({low_def[2]} at "
          f"{low_def[3]:g} CPU; target >= 1.00)")


if __name__ == "__main__":
    main()
