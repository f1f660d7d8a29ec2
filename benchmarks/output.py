"""Output throughput through launcher, measured side by side in one run (medians of N runs,
taking turns every round).

    python benchmarks/output.py [--runs 5] [--image launcher-base:bookworm] [--mb 300]

A workload writes MB megabytes (lines of 1 KiB, each with its number, as a training log's
lines have digits; `--mixed`: an `epoch N/M` line every 50 lines, so no chunk is of one shape)
to stdout, read by a pipe into /dev/null (`| cat >/dev/null`: a reader
that is a process, not a file). Timed from start to exit:

- bare: `python3 writer.py`
- native: `launcher run --runtime native -- python3 writer.py` (the supervisor reads the
  output, scans it for cycles and failure words, passes it on)
- docker run: `docker run --rm IMAGE python3 writer.py`
- launcher --image: `launcher run --runtime docker --image IMAGE -- python3 writer.py` (the
  supervisor in the container does the same, launcher relays the attach stream)

Targets (issue 40): native within 1.5 s for 300 MB; launcher --image at least 0.9x the speed
of plain docker run (its time at most 1/0.9 of docker run's). The daemon settles (untimed)
between two commands. A start's own cost is in benchmarks/startup.py; this one includes it,
as a user's run does.
"""

from __future__ import annotations

import argparse
import os
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


def timed(cmd: str, env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run(["bash", "-c", f"{cmd} | cat >/dev/null"], env=env, check=True,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


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
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="launcher-output-"))
    (work / "writer.py").write_text(WRITER.format(lines=args.mb * 1024, mixed=args.mixed))
    env = {**os.environ, "LAUNCHER_RUNS_DIR": str(work / "runs")}
    launcher = f"{BIN / 'launcher'} run"
    cmds = {"bare": "python3 writer.py",
            "native": f"{launcher} --runtime native -- python3 writer.py"}
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
    print(f"# benchmarks/output.py --runs {args.runs} --mb {args.mb}"
          f"{' --mixed' if args.mixed else ''}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs; medians, "
          f"output piped to `cat >/dev/null`")
    print(f"{'command':<20} {'median s':>9} {'min s':>7} {'max s':>7} {'MB/s':>7}")
    for k, v in times.items():
        print(f"{k:<20} {med[k]:9.3f} {min(v):7.3f} {max(v):7.3f} {args.mb / med[k]:7.0f}")
    print(f"native: {med['native']:.2f} s for {args.mb} MB (target <= 1.5 s for 300 MB); "
          f"{med['native'] - med['bare']:.2f} s over bare")
    if docker:
        print(f"launcher --image speed / docker run speed: "
              f"{med['docker run'] / med['launcher --image']:.2f} (target >= 0.90)")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
