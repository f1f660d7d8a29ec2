"""`launcher bench-memory`: the real worker (framework and GPU init included) at several chunk
sizes, each in its own capped cgroup; its peak from the cgroup's counter and from the process
tree's RSS; a fit peak = base + per_item x size with its error; N workers at once (peaks are
not additive); and a profile that extends the given one with what was measured."""

from __future__ import annotations

import math
import statistics
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from launcher.errors import LauncherError
from launcher.jobs.execute import LocalExecutor
from launcher.jobs.job import Prepared
from launcher.jobs.ledger import Chunk
from launcher.units import format_size, mib_up, term

MARGIN = 1.10  # workers.memory over the predicted peak (at least the fit's error)
SAMPLE_S = 0.05


@dataclass
class Measurement:
    size: int
    cgroup_peak: int | None
    rss_peak: int
    seconds: float
    status: int
    diagnosis: str

    @property
    def peak(self) -> int:
        return self.cgroup_peak or self.rss_peak


class TreeRss(threading.Thread):
    """The largest total RSS of one or more process trees, sampled every 50 ms."""

    def __init__(self) -> None:
        super().__init__(daemon=True, name="launcher-rss")
        self.pids: dict[int, int] = {}  # root pid -> its tree's peak
        self.total_peak = 0
        self.done = threading.Event()
        self.lock = threading.Lock()

    def add(self, pid: int) -> None:
        with self.lock:
            self.pids[pid] = 0

    def run(self) -> None:
        import psutil

        from launcher.telemetry.sampler import tree

        while not self.done.wait(SAMPLE_S):
            total = 0
            with self.lock:
                roots = list(self.pids)
            for pid in roots:
                rss = 0
                for proc in tree(pid):
                    try:
                        rss += proc.memory_info().rss
                    except psutil.Error:
                        continue  # exited while we looked
                with self.lock:
                    self.pids[pid] = max(self.pids[pid], rss)
                total += rss
            self.total_peak = max(self.total_peak, total)

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=5)


def _executor(p: Prepared, folder: Path, items: list[str] | None,
              cap: int | None) -> LocalExecutor:
    from launcher.runtime.engines import get_engine

    return LocalExecutor(p.spec, p.resolved, get_engine("native"), folder, None,
                         p.spec.path.resolve().parent, items, memory_limit=cap)


def measure(p: Prepared, sizes: list[int], folder: Path, items: list[str] | None,
            say: Any = None) -> list[Measurement]:
    """Each size alone, on the first GPU of the plan (one GPU visible, as in a job)."""
    for size in sizes:
        if size > p.spec.items:
            raise LauncherError(f"--sizes: {size} is more than the job's {p.spec.items} items")
    ex = _executor(p, folder, items, p.plan.usable_bytes)
    gpu = p.plan.gpus[0]
    out = []
    for k, size in enumerate(sizes):
        rss = TreeRss()
        rss.start()
        started = time.monotonic()
        o = ex.execute(Chunk(1_000_000 + k, 0, size), gpu, threading.Event(),
                       observe=lambda info, rss=rss: info.pid and rss.add(info.pid))
        rss.stop()
        m = Measurement(size, o.cgroup_peak, max(rss.pids.values(), default=0),
                        round(time.monotonic() - started, 3), o.status, o.diagnosis)
        if o.status != 0:
            raise LauncherError(f"the worker failed at {size} items: {o.diagnosis} (log: "
                                f"{folder / 'chunks'})")
        if say:
            say(f"{size} items: peak {format_size(m.peak)} (cgroup "
                f"{format_size(m.cgroup_peak) if m.cgroup_peak else '-'}, tree RSS "
                f"{format_size(m.rss_peak)}) in {m.seconds:.1f}s")
        out.append(m)
    return out


def fit(points: list[tuple[int, int]]) -> tuple[float, float, float]:
    """Least squares peak = base + per_item x size; (base, per_item, largest relative error
    of the fit at the measured sizes)."""
    if len({s for s, _ in points}) < 2:
        raise LauncherError("--sizes: give at least two different sizes to fit a line")
    xs, ys = [float(s) for s, _ in points], [float(v) for _, v in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    per = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs)
    base = my - per * mx
    if min(ys) <= 0:
        raise LauncherError("bench-memory: a measurement read no memory at all (0 bytes); "
                            "is the command doing its work?")
    err = max(abs(base + per * x - y) / y for x, y in zip(xs, ys, strict=True))
    return base, per, err


def measure_concurrent(p: Prepared, size: int, n: int, folder: Path,
                       items: list[str] | None) -> dict[str, Any]:
    """N workers of `size` at once: each one's peak, their sum, and the peak of the total."""
    ex = _executor(p, folder, items, p.plan.usable_bytes)
    rss = TreeRss()
    rss.start()
    outcomes: list[Any] = [None] * n
    gpus = p.plan.gpus

    def one(k: int) -> None:
        outcomes[k] = ex.execute(Chunk(2_000_000 + k, 0, size), gpus[k % len(gpus)],
                                 threading.Event(), observe=lambda info: info.pid and
                                 rss.add(info.pid))

    threads = [threading.Thread(target=one, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rss.stop()
    failed = [o for o in outcomes if o is None or o.status != 0]
    if failed:
        raise LauncherError(f"--concurrent {n}: a worker failed: "
                            f"{failed[0].diagnosis if failed[0] else 'no outcome'}")
    peaks = list(rss.pids.values())
    return {"workers": n, "size": size, "peaks_bytes": peaks, "sum_of_peaks_bytes": sum(peaks),
            "peak_of_total_bytes": rss.total_peak}


def choose_chunk_size(p: Prepared, base: float, per_item: float) -> int:
    """The spec's chunk_size; for `auto`, the largest size whose predicted peak lets every
    slot run at once within the usable memory, and no more than an even share of the items."""
    if p.spec.chunk_size:
        return p.spec.chunk_size
    slots = p.plan.slots
    share = math.ceil(p.spec.items / slots)
    if not p.plan.usable_bytes or per_item <= 0:
        return share
    fits = int((p.plan.usable_bytes / slots / MARGIN - base) / per_item)
    if fits < 1:
        raise LauncherError(f"even one item needs ~{format_size(int(base + per_item))}; "
                            f"{slots} slots of {format_size(p.plan.usable_bytes // slots)} "
                            f"cannot hold it: use fewer slots (--max-concurrent)")
    size = min(fits, share)
    digits = 10 ** max(0, len(str(size)) - 2)  # two significant figures
    return max(1, size // digits * digits)


def write_profile(p: Prepared, path: Path, result: dict[str, Any]) -> None:
    """A profile that extends the one measured under, with what was measured, and why."""
    from launcher.profiles.writer import write_profile as write

    m = result["measurements"]
    notes = [
        f"For job {p.spec.name} ({p.spec.path}). Measured peaks (cgroup counter, else the "
        f"process tree's RSS): " + ", ".join(f"{x['size']} items {format_size(x['peak'])}"
                                              for x in m) + ".",
        f"Fit: peak = {format_size(int(result['base_bytes']))} "
        f"{term(result['per_item_bytes'], 'bytes')} x items (largest error "
        f"{result['fit_error']:.1%}).",
        f"workers.memory = the predicted peak at chunk_size {result['chunk_size']} "
        f"({format_size(result['predicted_chunk_peak_bytes'])}) x {result['margin']:.2f}; "
        f"jobs.max_concurrent = {result['concurrency_binding']}."]
    write(path, p.resolved.profile, "launcher bench-memory", {
        "workers": {"memory": mib_up(result["workers_memory_bytes"])},
        "jobs": {"chunk_size": result["chunk_size"],
                 "max_concurrent": result["max_concurrent"]}}, notes)


def result_of(p: Prepared, ms: list[Measurement], predict: int | None,
              concurrent: dict[str, Any] | None) -> dict[str, Any]:
    base, per, err = fit([(m.size, m.peak) for m in ms])
    size = choose_chunk_size(p, base, per)
    chunk_peak = base + per * size
    margin = max(MARGIN, 1 + err)
    memory = -(-int(chunk_peak * margin) // 2**20) * 2**20  # whole MiB: as printed and written
    bounds = {"GPU slots" if p.plan.gpus[0] is not None else "CPU slots": p.plan.slots}
    if p.plan.usable_bytes:
        bounds[f"memory ({format_size(p.plan.usable_bytes)} usable / "
               f"{format_size(memory)})"] = max(1, p.plan.usable_bytes // memory)
    pids = {k: v for k, v in p.plan.bounds.items() if k.startswith("the pids")}
    bounds.update(pids)
    binding, concurrency = min(bounds.items(), key=lambda kv: kv[1])
    out: dict[str, Any] = {
        "measurements": [{**asdict(m), "peak": m.peak} for m in ms],
        "base_bytes": round(base), "per_item_bytes": per, "fit_error": round(err, 4),
        "chunk_size": size, "predicted_chunk_peak_bytes": round(chunk_peak),
        "margin": round(margin, 3), "workers_memory_bytes": memory,
        "max_concurrent": concurrency, "concurrency_binding": f"{concurrency} (set by "
                                                             f"{binding})",
    }
    if predict:
        out["predict_items"] = predict
        out["predicted_peak_bytes"] = round(base + per * predict)
    if concurrent:
        out["concurrent"] = concurrent
    return out
