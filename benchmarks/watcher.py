"""The supervisor's watch, its cost in CPU: a workload of 1,000 idle threads under `launcher
run`, natively and in a container; the supervisor's own CPU time over a window of the run, from
/proc on this host, as a share of one core. Three workloads: one that prints nothing (time
windows), one that prints `epoch N` every 5 s (a cycle each, sampled at 1 Hz), and one every
second (cycles that short are sampled 4 times a cycle to catch their peaks, within 2% of a
core: Sampler.pace).

    python benchmarks/watcher.py [--seconds 30] [--threads 1000] [--image IMAGE]

Target (issue 40): at most 1% of a core with 1,000 threads, in a container, at 1 Hz. The first
5 s (imports, the first census of the threads) are left out of the window.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
WORKLOAD = """import sys, threading, time
ev = threading.Event()
for _ in range({threads}):
    threading.Thread(target=ev.wait, daemon=True).start()
every = float(sys.argv[1])
for n in range(int(({seconds} + 10) / max(every, 1))):
    if every:
        print(f"epoch {{n}}", flush=True)
    time.sleep(every or 1)
"""
CYCLES = {"no output (time windows)": "0", "a cycle every 5 s": "5", "a cycle every second": "1"}
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def supervisor_pid(launcher_pid: int, container: bool) -> int | None:
    """The supervisor: natively launcher's child; in a container its PID 1, which the
    daemon's inspect gives."""
    if container:
        out = subprocess.run(["docker", "ps", "-q", "--filter", "label=launcher.owner"],
                             capture_output=True, text=True).stdout.split()
        if not out:
            return None
        info = json.loads(subprocess.run(["docker", "inspect", out[0]], capture_output=True,
                                         text=True).stdout)
        return int(info[0]["State"]["Pid"]) or None
    children = Path(f"/proc/{launcher_pid}/task/{launcher_pid}/children").read_text().split()
    return int(children[0]) if children else None


def measure(cmd: list[str], env: dict[str, str], seconds: int, container: bool) -> float:
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        pid = None
        deadline = time.monotonic() + 60
        while pid is None and time.monotonic() < deadline:
            time.sleep(0.2)
            pid = supervisor_pid(proc.pid, container)
        assert pid is not None, "the supervisor did not start"
        time.sleep(5)
        c0, t0 = cpu_seconds(pid), time.monotonic()
        time.sleep(seconds)
        c1, t1 = cpu_seconds(pid), time.monotonic()
        return (c1 - c0) / (t1 - t0)
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1000)
    ap.add_argument("--image", default="launcher-base:bookworm")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="launcher-watcher-"))
    (work / "w.py").write_text(WORKLOAD.format(threads=args.threads, seconds=args.seconds))
    env = {**os.environ, "LAUNCHER_RUNS_DIR": str(work / "runs")}
    os.chdir(work)
    prof = work / "p.yaml"
    prof.write_text("extends: base\nlimits: {pids: 4096}\n")
    base = [str(BIN / "launcher"), "run", "-p", str(prof)]
    docker = shutil.which("docker") and subprocess.run(["docker", "info"],
                                                        capture_output=True).returncode == 0
    print(f"# benchmarks/watcher.py --seconds {args.seconds} --threads {args.threads}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs; the supervisor's CPU "
          f"as a share of one core (target <= 1% at 1 Hz)")
    print(f"{'workload':<28} {'native':>8} {'container':>10}")
    for name, every in CYCLES.items():
        native = measure([*base, "--runtime", "native", "--", sys.executable, "w.py", every],
                         env, args.seconds, False)
        contained = measure([*base, "--runtime", "docker", "--image", args.image, "--",
                             "python3", "w.py", every], env, args.seconds, True) if docker \
            else None
        print(f"{name:<28} {100 * native:7.2f}% " + (
            f"{100 * contained:9.2f}%" if contained is not None else "         -"), flush=True)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
