"""Telemetry overhead: CPU time of one sample of a real process tree, as % of one core at 1 Hz.

    python benchmarks/telemetry.py [--samples 300] [--framework jax]

Starts a process that imports the framework and idles (JAX keeps ~20 threads and a few
thousand memory maps), samples it repeatedly with the sampler `launcher run` uses, and prints
the CPU seconds per sample and the share of one core at 1 Hz. Target: <= 1%.
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
    args = ap.parse_args()
    code = IDLE[args.framework] + "\nprint('ready', flush=True)\nimport time; time.sleep(600)"
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
    finally:
        p.kill()
    print(f"{args.framework}: tree of {row['threads']} threads, {row['maps']} maps, "
          f"RSS {row['rss_bytes'] >> 20} MiB")
    print(f"one sample: {cpu * 1000:.2f} ms CPU ({wall * 1000:.2f} ms wall); at 1 Hz that is "
          f"{cpu * 100:.3f}% of one core (target <= 1%)")


if __name__ == "__main__":
    main()
