"""Telemetry overhead: CPU time of one sample of a real process tree, as % of one core at 1 Hz.

    python benchmarks/telemetry.py [--samples 300] [--framework jax] [--threads 1000]

Starts a process that imports the framework and idles (JAX keeps ~20 threads and a few
thousand memory maps; --threads adds that many idle threads), samples it repeatedly with the
sampler `launcher run` uses, and prints the CPU seconds per sample and the share of one core at
1 Hz. Then the same for a cycle boundary's row (the limits, the frameworks loaded, a census of
every thread's name) and the fit of the trends over the rows so far, as a run with a cycle
every second pays them: the per-cycle counters and the census together. Then a run whose output
marks no cycle: each 1 Hz sample goes into the growth watch's time windows, fitted as each
closes. Target: <= 1%.
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from launcher.telemetry.sampler import Sampler  # noqa: E402

IDLE = {
    "jax": "import jax, jax.numpy as j; jax.jit(lambda x: x @ x)(j.ones((64, 64)))",
    "tf": "import tensorflow as tf; tf.matmul(tf.ones((64, 64)), tf.ones((64, 64)))",
    "torch": "import torch; torch.ones(64, 64) @ torch.ones(64, 64)",
    "none": "import numpy",
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--framework", default="jax", choices=sorted(IDLE))
    ap.add_argument("--threads", type=int, default=0, help="idle threads to add")
    args = ap.parse_args()
    code = (IDLE[args.framework] + "\nimport threading, time\n"
            f"for _ in range({args.threads}):\n"
            "    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n"
            "print('ready', flush=True)\ntime.sleep(600)")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        s = Sampler(p.pid, io.StringIO(), {"pids_max": None, "max_map_count": 65530,
                                           "memory_limit_bytes": None})
        row = s.sample()
        t_cpu, t_wall = time.process_time(), time.perf_counter()
        for _ in range(args.samples):
            s.sample()
        cpu = (time.process_time() - t_cpu) / args.samples
        wall = (time.perf_counter() - t_wall) / args.samples
        cycle = boundary_cost(s, args.samples)
        timed = time_window_cost(s, args.samples)
    finally:
        p.kill()
    print(f"{args.framework}: tree of {row['threads']} threads, {row['maps']} maps, "
          f"RSS {row['rss_bytes'] >> 20} MiB")
    print(f"one sample: {cpu * 1000:.2f} ms CPU ({wall * 1000:.2f} ms wall); at 1 Hz that is "
          f"{cpu * 100:.3f}% of one core (target <= 1%)")
    print(f"a cycle every second ({row['threads']} threads): a sample, a boundary's row (the "
          f"limits, the frameworks loaded, a census within its CPU budget) and the trends' fit "
          f"cost {cycle * 1000:.2f} ms CPU a second: {cycle * 100:.3f}% of one core (target "
          f"<= 1%)")
    print(f"no line marks a cycle ({row['threads']} threads): a sample and the time windows' "
          f"fit cost {timed * 1000:.2f} ms CPU a second: {timed * 100:.3f}% of one core "
          f"(target <= 1%)")


def time_window_cost(s: Sampler, n: int) -> float:
    """CPU seconds a second of a run that prints no cycle: a 1 Hz sample into the growth
    watch, which puts it into its time windows and fits them as each closes."""
    from launcher.telemetry.growth_watch import GrowthOptions, GrowthWatch

    watch = GrowthWatch(GrowthOptions(), lambda line: None)
    s.rows.clear()
    s.on_sample = watch.on_sample
    watch.attach(s, None)
    t_cpu = time.process_time()
    for _ in range(n):
        s.start_time -= 1.0
        s.sample()
    assert watch.timeline is not None and not watch.broken
    return (time.process_time() - t_cpu) / n


def boundary_cost(s: Sampler, n: int) -> float:
    """CPU seconds a second of a run with a cycle every second and 1 Hz samples: a sample, a
    boundary's row and the fit, as GrowthWatch pays them. The sampler's clock is moved a
    second on each time, so the census keeps to its budget as in a real run, and the tick
    half a second after a boundary finds its row recent enough (Sampler.due)."""
    from launcher.telemetry.growth import cycle_trends as trends

    t_cpu = time.process_time()
    for i in range(n):  # a boundary half a second after each 1 Hz tick
        s.start_time -= 0.5
        s.sample({"cycle": {"unit": "cycle", "n": i + 1, "total": None, "line": ""}})
        trends(s.rows, now=s.rows[-1]["t"])
        s.start_time -= 0.5
        if s.due():  # as its thread does: the boundary's row within the interval suffices
            s.sample()
    return (time.process_time() - t_cpu) / n


if __name__ == "__main__":
    main()
