"""A loop that grows, or does not, cycle after cycle: the growth docs' and benchmarks' workload.

    python3 leak.py --threads 3 --mib 0 --cycles 100 --seconds 0.5 --noise 0.5

Each cycle prints `cycle N/TOTAL` (flushed; `--say` another line, or `--say ''` nothing), then
keeps `--threads` more idle threads, `--mib` more MiB (touched) and `--files` more open files
alive: a leak, as a fold that keeps its datasets.
`--noise` varies each cycle's length and growth by up to that share (0.5: +-50%).
`--sawtooth-mib` allocates and frees that much within each cycle, and `--churn-threads` starts
and joins that many threads: neither grows.
On SIGTERM it says which cycle it finished and exits 0, as a script that checkpoints would.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import threading
import time

kept: list[object] = []
done = 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=float, default=0.0, help="threads kept per cycle")
    ap.add_argument("--mib", type=float, default=0.0, help="MiB kept per cycle")
    ap.add_argument("--files", type=int, default=0, help="files kept open per cycle")
    ap.add_argument("--cycles", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=0.5, help="length of a cycle")
    ap.add_argument("--noise", type=float, default=0.0, help="+- share of length and growth")
    ap.add_argument("--sawtooth-mib", type=float, default=0.0)
    ap.add_argument("--churn-threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--say", default="cycle {n}/{total}",
                    help="each cycle's line ({n}, {total}, {files}, {threads}); '' prints none")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    stop = threading.Event()

    def on_term(_sig: int, _frame: object) -> None:
        print(f"SIGTERM: checkpoint written after cycle {done}", flush=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, on_term)
    owed_threads = 0.0
    for n in range(1, a.cycles + 1):
        if a.say:
            print(a.say.format(n=n, total=a.cycles, files=len(os.listdir("/proc/self/fd")),
                               threads=threading.active_count()), flush=True)
        vary = 1 + rng.uniform(-a.noise, a.noise) if a.noise else 1.0
        owed_threads += a.threads * vary
        while owed_threads >= 1:
            t = threading.Thread(target=stop.wait, daemon=True)
            t.start()
            kept.append(t)
            owed_threads -= 1
        kept.extend(open(__file__) for _ in range(a.files))  # noqa: SIM115 - kept open
        if a.mib:
            block = bytearray(int(a.mib * vary * (1 << 20)))
            block[::4096] = b"x" * len(block[::4096])  # touched: resident
            kept.append(block)
        churn = [threading.Thread(target=time.sleep, args=(0.05,)) for _ in range(a.churn_threads)]
        for t in churn:
            t.start()
        if a.sawtooth_mib:
            tooth = bytearray(int(a.sawtooth_mib * (1 << 20)))
            tooth[::4096] = b"x" * len(tooth[::4096])
        time.sleep(a.seconds * (1 + rng.uniform(-a.noise, a.noise) if a.noise else 1.0))
        for t in churn:
            t.join()
        if a.sawtooth_mib:
            del tooth
        global done
        done = n
    print(f"finished {a.cycles} cycles", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
