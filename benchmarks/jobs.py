"""Jobs: 99 one-second chunks over 12 slots, wall time against the ideal, and launcher's own
cost per chunk, measured side by side in one run.

    python benchmarks/jobs.py [--chunks 99] [--slots 12] [--seconds 1] [--backends local,ray,slurm]
        [--slurm-slots N]

ideal = ceil(chunks / slots) x seconds, each backend with its own slots. Each chunk is
`sleep SECONDS` in a fresh supervised process (its own cgroup where the host allows it).
launcher's cost per chunk = the median of (chunk time in the ledger - SECONDS); the first
wave's extra seconds show what starting up costs (on Ray: a worker process per slot, started by
Ray for each job, ~0.5-1 s of CPU each). On Ray the job runs twice, on a fresh cluster and
again (Ray's workers belong to a job, so the second starts its own too). On Slurm
(scripts/slurm-up.sh's one node: export the SLURM_CONF it prints) each chunk is a Slurm job of
one CPU (threads.intra_op 1), so the node's CPUs bound the slots: `--slurm-slots` defaults to
the CPUs Slurm's nodes have (`sinfo`), 2 on 2 cores. Where a Slurm chunk's time goes is printed
below the table, from the files each step leaves (their birth and change times) and the ledger:
sbatch and Slurm's scheduling to the job's start (its log opened by slurmstepd), the job's start
to the chunk's (launcher's task: interpreter, imports, caps), the chunk itself (its supervisor's
exit file, less SECONDS), the task's end (its outcome file), and the driver seeing it (the
ledger's end).
The package's bytecode is compiled first, as an installed launcher has it (with
PYTHONDONTWRITEBYTECODE=1 every task would compile it again).
Targets: wall / ideal <= 1.15 local, <= 1.5 on Ray (none set for Slurm: its scheduler's
latency is its own).
"""

from __future__ import annotations

import argparse
import compileall
import json
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
    if backend == "slurm":
        print(slurm_breakdown(d / "out", db, seconds), file=sys.stderr)
    return wall, statistics.median(spans) - seconds, first_wave - seconds


def _birth(path: Path) -> float:
    """A file's birth time (statx; ext4 and xfs keep it), else its change time."""
    out = subprocess.run(["stat", "--printf=%.9W %.9Z", str(path)], capture_output=True,
                         text=True, check=True).stdout.split()
    return float(out[0]) if float(out[0]) > 0 else float(out[1])


def slurm_breakdown(out: Path, db: sqlite3.Connection, seconds: float) -> str:
    """Median seconds of each step of a Slurm chunk, from the files it left (see above)."""
    ledger = {i: (s, e) for i, s, e in db.execute("SELECT id, started, ended FROM chunks")}
    steps: dict[str, list[float]] = {k: [] for k in (
        "sbatch+schedule", "task start", "chunk-SECONDS", "task end", "driver sees")}
    for payload in (out / "slurm").glob("*-*.json"):
        if payload.name.endswith(".outcome.json"):
            continue
        chunk = json.loads(payload.read_text())["chunk"]["id"]
        stem = payload.with_suffix("")
        claimed, seen = ledger[chunk]
        started = _birth(stem.with_suffix(".log"))  # slurmstepd opens it as the job starts
        cdir = out / "chunks" / f"{chunk:05d}"
        ready = _birth(cdir / "log.txt")  # the task's executor, about to start the chunk
        exited = (cdir / "exit.json").stat().st_mtime
        ended = Path(f"{stem}.outcome.json").stat().st_mtime
        for k, v in zip(steps, (started - claimed, ready - started, exited - ready - seconds,
                                ended - exited, seen - ended), strict=True):
            steps[k].append(v)
    return "slurm, median s per chunk: " + ", ".join(
        f"{k} {statistics.median(v):.2f}" for k, v in steps.items() if v)


def slurm_cpus() -> int:
    """The CPUs Slurm's nodes have, all together (one chunk of one CPU each at once)."""
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%c"], capture_output=True, text=True)
    return sum(int(n) for n in out.stdout.split() if n.isdigit()) or 1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=99)
    ap.add_argument("--slots", type=int, default=12)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--backends", default="local")
    ap.add_argument("--slurm-slots", type=int, default=None,
                    help="slots for --backends slurm (default: the CPUs Slurm's nodes have)")
    ap.add_argument("--ray-address", default=None,
                    help="a running cluster for --backends ray (else a local one is started)")
    args = ap.parse_args()
    compileall.compile_dir(str(ROOT / "launcher"), quiet=1)  # as installed (see above)
    print(f"{args.chunks} chunks of `sleep {args.seconds:g}`; ideal = ceil(chunks / slots) x "
          f"{args.seconds:g}s")
    print(f"{'backend':<8} {'slots':>5} {'ideal s':>7} {'wall s':>7} {'wall/ideal':>10} "
          f"{'launcher ms/chunk':>18} {'first wave extra s':>19} target")
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
            slots = args.slots
            if backend == "slurm":
                slots = args.slurm_slots or slurm_cpus()
            ideal = math.ceil(args.chunks / slots) * args.seconds
            runs = ["1st", "2nd"] if backend == "ray" else [""]
            for label in runs:
                wall, cost, first = run(backend, args.chunks, slots, args.seconds,
                                        Path(tmp), extra, label)
                target = {"local": "<= 1.15", "ray": "<= 1.5"}.get(backend, "-")
                name = f"{backend} {label}".strip()
                print(f"{name:<8} {slots:5d} {ideal:7.1f} {wall:7.1f} {wall / ideal:10.2f} "
                      f"{cost * 1000:18.0f} {first:19.1f} {target}", flush=True)
    if cluster is not None:
        cluster.shutdown()


if __name__ == "__main__":
    main()
