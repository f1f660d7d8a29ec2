"""Output throughput through launcher, measured side by side in one run (medians of N runs,
taking turns every round).

    python benchmarks/output.py [--runs 5] [--image launcher-base:bookworm] [--mb 300]
        [--kind uniform|mixed|random|unique] [--rate 20]

A workload writes MB megabytes to stdout, read by a pipe into /dev/null (`| cat >/dev/null`: a
reader that is a process, not a file). `--kind uniform` (the default): lines of 1 KiB, each
with its number, as a training log's lines have digits; `mixed` (or `--mixed`): an `epoch N/M`
line every 50 lines, so no chunk is of one shape; `random`: random bytes; `unique`: log lines
of unique ids (`req <hex> user=<hex> status=ok n=N`), an `Epoch N/M` line every 20,000. The
random and unique bytes are made before (a file the workload writes out in 8 KiB writes, as
Python's print does), so the workload is the pipe's speed. `--rate 20`: the unique lines at
20 MB/s for MB megabytes, natively, and the watch's CPU said (summary.json's
growth.output.cpu_s over the run), beside the supervisor's whole CPU over a bare run's.
Timed from start to exit:

- bare: `python3 writer.py`
- native: `launcher run --runtime native -- python3 writer.py` (the supervisor reads the
  output, scans it for cycles and failure words, passes it on)
- docker run: `docker run --rm IMAGE python3 writer.py`
- launcher --image: `launcher run --runtime docker --image IMAGE -- python3 writer.py` (the
  supervisor in the container does the same, launcher relays the attach stream)

Targets (issue 40): native within 1.5 s for 300 MB; launcher --image at least 0.9x the speed
of plain docker run (its time at most 1/0.9 of docker run's). Issue 44: random 100 MB and
unique 20 MB natively within bare + 1.0 s; the watch at 20 MB/s of unique lines <= 2% of a
core. The daemon settles (untimed)
between two commands. A start's own cost is in benchmarks/startup.py; this one includes it,
as a user's run does.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
WRITER = """import sys
w = sys.stdout.buffer
pad = b"x" * 1013 + b"\\n"
mixed = {mixed}
for i in range({lines}):
    if mixed and i % 50 == 0:  # another shape among them: the chunk is cut into lines
        w.write(b"epoch %d/%d loss 0.%d\\n" % (i // 50, {lines} // 50, i))
    w.write(b"%09d " % i + pad)
"""
PACED = """import sys, time
data = memoryview(open({path!r}, "rb").read())
w = sys.stdout.buffer
rate = {rate} * 1e6  # bytes a second (0: as fast as the pipe takes them)
total, t0, size = {total}, time.monotonic(), len(data)
for at in range(0, total, 8192):
    w.write(data[at % size:at % size + 8192])
    if rate and at % (1 << 20) == 0:
        time.sleep(max(0.0, t0 + at / rate - time.monotonic()))
"""


def make_data(kind: str, mb: int, path: Path) -> None:
    """The random bytes or unique lines the workload writes (made once, before)."""
    r = random.Random(44)
    with open(path, "wb") as f:
        if kind == "random":
            f.write(r.randbytes(mb << 20))
            return
        size, n = 0, 0
        while size < mb << 20:
            line = b"req %s user=%s status=ok n=%d\n" % (
                r.randbytes(8).hex().encode(), r.randbytes(4).hex().encode(), n)
            if n % 20000 == 0:
                line += b"Epoch %d/%d loss 0.5\n" % (n // 20000 + 1, mb)
            f.write(line)
            size, n = size + len(line), n + 1


CPU: dict[str, list[float]] = {}  # command -> CPU seconds of its processes, each run


def timed(cmd: str, env: dict[str, str]) -> float:
    """Seconds from start to exit; the CPU of its processes (not a container's: the daemon's
    children) kept in CPU."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(["bash", "-c", f"{cmd} | cat >/dev/null"], env=env, check=True,
                   stderr=subprocess.DEVNULL)
    took = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.setdefault(cmd, []).append(after.ru_utime - before.ru_utime + after.ru_stime
                                   - before.ru_stime)
    return took


def cpu_of(cmd: str, env: dict[str, str]) -> float:
    """CPU seconds of `cmd`'s processes (user + system, its children's included)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(["bash", "-c", f"{cmd} >/dev/null"], env=env, check=True,
                   stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def watch_at_rate(args: argparse.Namespace, work: Path, env: dict[str, str]) -> None:
    """The unique lines at --rate MB/s, natively: the watch's own CPU (its reading, from the
    run record) and the supervisor's whole CPU (launcher's run over the bare one's)."""
    make_data("unique", 20, work / "unique.txt")
    (work / "paced.py").write_text(PACED.format(path=str(work / "unique.txt"), rate=args.rate,
                                                total=args.mb << 20))
    launcher = f"{BIN / 'launcher'} run --runtime native -- python3 paced.py"
    os.chdir(work)
    bare, over, share = [], [], []
    for i in range(args.runs):
        bare.append(cpu_of("python3 paced.py", env))
        run_env = {**env, "LAUNCHER_RUNS_DIR": str(work / f"runs{i}")}
        over.append(cpu_of(launcher, run_env) - bare[-1])
        (folder,) = (work / f"runs{i}").iterdir()
        summary = json.loads((folder / "summary.json").read_text())
        out = summary["growth"]["output"]
        share.append(out["cpu_s"] / summary["duration_s"])
        print(f"run {i}: {summary['duration_s']:.1f} s, the watch {out['cpu_s']:.3f} s CPU "
              f"({100 * share[-1]:.2f}% of a core), read {out['read_bytes'] >> 20} MiB, "
              f"skipped {out['skipped_bytes'] >> 20} MiB in {out['skipped_reads']} reads, "
              f"{out['found_lines']} lines found in them; cycles: "
              f"{len(summary['growth'].get('cycles') or [])}")
    seconds = args.mb / args.rate
    print(f"# unique lines at {args.rate} MB/s for {args.mb} MB ({seconds:.0f} s), natively, "
          f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs; medians of "
          f"{args.runs}")
    print(f"the watch (its reading of the output): {100 * statistics.median(share):.2f}% of "
          f"a core (target <= 2%)")
    print(f"launcher + supervisor over the bare workload: "
          f"{100 * statistics.median(over) / seconds:.2f}% of a core (the pump, the samples, "
          f"the start and end)")


def settle(timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and subprocess.run(
            ["docker", "ps", "--all", "--quiet", "--filter", "label=launcher.owner"],
            capture_output=True, text=True).stdout.strip():
        time.sleep(0.02)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--image", default="launcher-base:bookworm")
    ap.add_argument("--mb", type=int, default=300)
    ap.add_argument("--no-docker", action="store_true")
    ap.add_argument("--mixed", action="store_true",
                    help="an `epoch N/M` line every 50 lines: chunks of two shapes")
    ap.add_argument("--kind", choices=("uniform", "mixed", "random", "unique"),
                    default="uniform")
    ap.add_argument("--rate", type=float, default=0.0,
                    help="MB/s: the unique lines paced, natively, and the watch's CPU said")
    args = ap.parse_args()
    kind = "mixed" if args.mixed else args.kind
    work = Path(tempfile.mkdtemp(prefix="launcher-output-"))
    env = {**os.environ, "LAUNCHER_RUNS_DIR": str(work / "runs")}
    if args.rate:
        watch_at_rate(args, work, env)
        shutil.rmtree(work, ignore_errors=True)
        return
    if kind in ("uniform", "mixed"):
        (work / "writer.py").write_text(WRITER.format(lines=args.mb * 1024,
                                                      mixed=kind == "mixed"))
    else:
        make_data(kind, args.mb, work / f"{kind}.bin")
        (work / "writer.py").write_text(PACED.format(path=str(work / f"{kind}.bin"), rate=0,
                                                     total=args.mb << 20))
    launcher = f"{BIN / 'launcher'} run"
    cmds = {"bare": "python3 writer.py",
            "native": f"{launcher} --runtime native -- python3 writer.py",
            "native -- true": f"{launcher} --runtime native -- true",
            "native, no watch": f"{launcher} --runtime native -e LAUNCHER_WATCH=0 -- "
                                f"python3 writer.py"}
    docker = not args.no_docker and shutil.which("docker") and subprocess.run(
        ["docker", "info"], capture_output=True).returncode == 0
    if docker:
        cmds["docker run"] = (f"docker run --rm -v {work}:{work} -w {work} {args.image} "
                              f"python3 writer.py")
        cmds["launcher --image"] = (f"{launcher} --runtime docker --image {args.image} -- "
                                    f"python3 writer.py")
    os.chdir(work)
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for cmd in cmds.values():  # warm-up
        timed(cmd, env)
        settle()
    for _ in range(args.runs):
        for name, cmd in cmds.items():
            times[name].append(timed(cmd, env))
            settle()
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"# benchmarks/output.py --runs {args.runs} --mb {args.mb} --kind {kind}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs; medians, "
          f"output piped to `cat >/dev/null`")
    print(f"{'command':<20} {'median s':>9} {'min s':>7} {'max s':>7} {'MB/s':>7} "
          f"{'CPU s':>7}")
    for k, v in times.items():
        cpu = statistics.median(CPU[cmds[k]][1:])  # (not the warm-up's)
        print(f"{k:<20} {med[k]:9.3f} {min(v):7.3f} {max(v):7.3f} {args.mb / med[k]:7.0f} "
              f"{cpu:7.2f}")
    print("(CPU s: the command's processes, user + system; a container's are the daemon's, "
          "not counted; `native, no watch`: launcher without the supervisor's pump and watch)")
    target = ("<= 1.5 s for 300 MB" if kind in ("uniform", "mixed") else
              "<= bare + 1.0 s")
    print(f"native: {med['native']:.2f} s for {args.mb} MB (target {target}); "
          f"{med['native'] - med['bare']:.2f} s over bare, of which launcher's start and end "
          f"(`-- true`) {med['native -- true']:.2f} s")
    if docker:
        print(f"launcher --image speed / docker run speed: "
              f"{med['docker run'] / med['launcher --image']:.2f} (target >= 0.90)")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
