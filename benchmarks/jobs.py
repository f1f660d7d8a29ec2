"""Jobs: 99 one-second chunks over 12 slots, wall time against the ideal, and launcher's own
cost per chunk, measured side by side in one run.

    python benchmarks/jobs.py [--chunks 99] [--slots 12] [--seconds 1] [--backends local,ray,slurm]

ideal = ceil(chunks / slots) x seconds. Each chunk is `sleep SECONDS` in a fresh supervised
process (its own cgroup where the host allows it). launcher's cost per chunk = the median of
(chunk time in the ledger - SECONDS); the first wave's extra seconds show what starting up costs
(on Ray: a worker process per slot, started by Ray for each job, ~0.5-1 s of CPU each). On Ray
the job runs twice, on a fresh cluster and again (Ray's workers belong to a job, so the second
starts its own too). On Slurm (scripts/slurm-up.sh's one node) each chunk is a Slurm job of
one CPU (threads.intra_op 1), so the node's CPUs bound the slots: `--slots 2` on 2 cores.
Targets: wall / ideal <= 1.15 local, <= 1.5 on Ray (none set for Slurm: its scheduler's
latency is its own).
"""

from __future__ import annotations

import argparse
import math
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(backend: str, chunks: int, slots: int, seconds: float, tmp: Path,
        extra: list[str], label: str = "") -> tuple[float, float, float]:
    d = tmp / f"{backend}{label}"
    d.mkdir()
    spec = d / "job.yaml"
    spec.write_text(f"name: bench-{backend}\ncommand: [sleep, '{seconds:g}']\nitems: {chunks}\n"
                    f"chunk_size: 1\nretries: 0\noutput: out\n")
    prof = d / "slots.yaml"
    prof.write_text(f"extends: base\njobs: {{max_concurrent: {slots}}}\n"
                    f"threads: {{intra_op: 1}}\n")  # a Slurm job of one CPU per chunk
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "launcher", "jobs", "run", str(spec), "-p", str(prof),
                    "--backend", backend, *extra], check=True, capture_output=True,
                   cwd=ROOT, timeout=1800)
    wall = time.perf_counter() - t
    db = sqlite3.connect(d / "out" / "ledger.sqlite")
    rows = list(db.execute("SELECT started, ended FROM chunks WHERE state='done' ORDER BY "
                           "started"))
    assert len(rows) == chunks, f"{backend}: {len(rows)} of {chunks} chunks done"
    spans = [e - s for s, e in rows]
    first_wave = max(e for _, e in rows[:slots]) - rows[0][0]  # includes starting the workers
    return wall, statistics.median(spans) - seconds, first_wave - seconds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=99)
    ap.add_argument("--slots", type=int, default=12)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--backends", default="local")
    ap.add_argument("--ray-address", default=None,
                    help="a running cluster for --backends ray (else a local one is started)")
    args = ap.parse_args()
    ideal = math.ceil(args.chunks / args.slots) * args.seconds
    print(f"{args.chunks} chunks of `sleep {args.seconds:g}` over {args.slots} slots; ideal "
          f"{ideal:.1f}s")
    print(f"{'backend':<8} {'wall s':>7} {'wall/ideal':>10} {'launcher ms/chunk':>18} "
          f"{'first wave extra s':>19} target")
    cluster = None
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends.split(","):
            extra = []
            if backend == "ray":
                address = args.ray_address
                if address is None:  # a local one: one node with the slots as its cap, and
                    # the CPUs they ask for (`launcher jobs ray-node` declares the same)
                    from ray.cluster_utils import Cluster

                    cluster = Cluster(initialize_head=True, head_node_args={
                        "num_cpus": args.slots * 4, "include_dashboard": False,
                        "resources": {"launcher_slot": args.slots}})
                    address = cluster.address
                extra = ["--address", address]
            runs = ["1st", "2nd"] if backend == "ray" else [""]
            for label in runs:
                wall, cost, first = run(backend, args.chunks, args.slots, args.seconds,
                                        Path(tmp), extra, label)
                target = {"local": "<= 1.15", "ray": "<= 1.5"}.get(backend, "-")
                name = f"{backend} {label}".strip()
                print(f"{name:<8} {wall:7.1f} {wall / ideal:10.2f} {cost * 1000:18.0f} "
                      f"{first:19.1f} {target}", flush=True)
    if cluster is not None:
        cluster.shutdown()


if __name__ == "__main__":
    main()
