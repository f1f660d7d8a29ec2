"""Import a framework, run a first operation, print the thread count (a JSON line).

Used by the thread-estimate tests, `launcher calibrate` and the benchmarks:
`python -m launcher.workloads.threadprobe [--peak] tf [SECONDS]`; with --peak, also the most
threads the process had from start through a few compiled training steps; with SECONDS, the
throughput of a 384x384 matmul loop run for that long (iterations/s).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from types import ModuleType


def _probe(framework: str) -> ModuleType:
    """The framework's probe functions (first_op, train, matmul), from its registry module."""
    from launcher.frameworks import get as get_framework
    from launcher.frameworks import known

    if not known(framework):
        raise SystemExit(f"unknown framework {framework!r}")
    return importlib.import_module(get_framework(framework).probe)


def first_op(framework: str) -> None:
    _probe(framework).first_op()


def thread_names() -> list[str]:
    return sorted(n for _, n in _named())


def matmul_loop(framework: str, seconds: float) -> float:
    """Iterations per second of a 384x384 float32 matmul (the throughput kernel of the docs)."""
    import time

    step = _probe(framework).matmul(384)
    step()
    time.sleep(0.3)  # let a CPU quota refill after the import, so timing starts without debt
    count, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step()
        count += 1
    return count / (time.perf_counter() - t0)


def train(framework: str) -> None:
    """A few real training steps, compilation included: what the peak estimate covers."""
    _probe(framework).train()


class Peak:
    """The most threads the process had, sampled every millisecond (this sampler excluded)."""

    def __init__(self) -> None:
        import threading

        self.count, self.names, self.me = 0, [], -1
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        import threading

        self.me = threading.get_native_id()
        while not self.done.wait(0.001):
            names = [n for tid, n in _named() if tid != self.me]
            if len(names) > self.count:
                self.count, self.names = len(names), sorted(names)

    def stop(self) -> tuple[int, list[str]]:
        self.done.set()
        self.thread.join()
        return self.count, self.names


def _named() -> list[tuple[int, str]]:
    out = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                out.append((int(tid), f.read().strip()))
        except OSError:
            pass
    return out


def main() -> None:
    args = sys.argv[1:]
    peak = None
    if "--peak" in args:  # from start to after training, compilation included
        args.remove("--peak")
        peak = Peak()
    framework = args[0] if args else "none"
    first_op(framework)
    names = thread_names()
    if peak is not None:  # not counting the sampler
        names.remove(next(n for tid, n in _named() if tid == peak.me))
    out: dict[str, object] = {"framework": framework, "threads": len(names), "names": names}
    if peak is not None:
        train(framework)
        out["peak"], out["peak_names"] = peak.stop()
    if len(args) > 1:
        out["per_s"] = round(matmul_loop(framework, float(args[1])), 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
