"""`launcher bench-memory`: the real worker (framework and GPU init included) at several chunk
sizes, each in its own capped cgroup; its peak is the cgroup's counter, what the chunk's memory
limit sees (the process tree's RSS only beside it, labelled, or where the chunk had no memory
cgroup of its own); a fit peak = base + per_item x size with its error; N workers at once
(peaks are not additive); and a profile that extends the given one with what was measured
(the fit, the chunk size, workers.memory), and nothing of the measuring host's CPUs or GPUs."""

from __future__ import annotations

import math
import statistics
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from launcher.errors import LauncherError
from launcher.jobs.execute import LocalExecutor, chunk_dir
from launcher.jobs.job import Prepared
from launcher.jobs.ledger import Chunk
from launcher.units import format_size, term

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

    @property
    def source(self) -> str:
        return "cgroup" if self.cgroup_peak else "tree RSS"

    def sentence(self) -> str:
        if self.cgroup_peak:
            return (f"{self.size} items: peak {format_size(self.peak)} (its cgroup's peak, what "
                    f"its memory limit sees; tree RSS {format_size(self.rss_peak)}, for "
                    f"reference only) in {self.seconds:.1f}s")
        return (f"{self.size} items: peak {format_size(self.peak)} (tree RSS: the chunk had no "
                f"memory cgroup of its own here) in {self.seconds:.1f}s")


class TreeRss(threading.Thread):
    """The largest total RSS of one or more process trees, sampled every 50 ms."""

    def __init__(self) -> None:
        super().__init__(daemon=True, name="launcher-rss")
        self.pids: dict[int, int] = {}  # root pid -> its tree's peak
        self.total_peak = 0
        self.cgroup_total_peak = 0  # the peak of the sum of the chunks' own cgroups' usage
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
            self.cgroup_total_peak = max(self.cgroup_total_peak,
                                         sum(cgroup_usage(pid) for pid in roots))

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=5)


def cgroup_usage(pid: int) -> int:
    """memory.current of the cgroup `pid` is in, when that is not launcher's own (a chunk's,
    once its supervisor entered it); 0 otherwise."""
    def where(p: int | str) -> str | None:
        try:
            text = Path(f"/proc/{p}/cgroup").read_text()
        except OSError:
            return None
        return next((line[3:] for line in text.splitlines() if line.startswith("0::")), None)

    path = where(pid)
    if path is None or path == where("self"):
        return 0
    try:
        return int(Path(f"/sys/fs/cgroup{path}/memory.current").read_text())
    except (OSError, ValueError):
        return 0


def _executor(p: Prepared, folder: Path, items: list[str] | None,
              cap: int | None) -> LocalExecutor:
    from launcher.runtime.engines import first_that

    return LocalExecutor(p.spec, p.resolved, first_that("runs_host_processes"), folder, None,
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
            raise LauncherError(f"the worker failed at {size} items: {failure(o)} (log: "
                                f"{chunk_dir(folder, 1_000_000 + k) / 'log.txt'})")
        if say:
            say(m.sentence())
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
    for k, o in enumerate(outcomes):
        if o is None or o.status != 0:
            why = failure(o) if o else "no outcome"
            raise LauncherError(f"--concurrent {n}: a worker failed: {why} (log: "
                                f"{chunk_dir(folder, 2_000_000 + k) / 'log.txt'})")
    rss_peaks = list(rss.pids.values())
    if all(o.cgroup_peak for o in outcomes):  # each its own cgroup: what the limits see
        peaks, total, source = [o.cgroup_peak for o in outcomes], rss.cgroup_total_peak, "cgroup"
    else:
        peaks, total, source = rss_peaks, rss.total_peak, "tree RSS"
    return {"workers": n, "size": size, "source": source, "peaks_bytes": peaks,
            "sum_of_peaks_bytes": sum(peaks), "peak_of_total_bytes": total or sum(peaks),
            "rss_peaks_bytes": rss_peaks, "rss_peak_of_total_bytes": rss.total_peak}


def failure(o: Any) -> str:
    """The diagnosis and the cause: the workload's last line, as `jobs run` shows it."""
    from launcher.jobs.runner import last_words

    last = last_words(o.log_tail)
    return o.diagnosis + (f" Its last line: {last}" if last else "")


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
    """A profile that extends the one measured under, with what was measured, and why; no
    jobs.max_concurrent: slots are the machine's that runs the job, not the measuring host's
    (`jobs plan` works them out there from workers.memory)."""
    from launcher.profiles.writer import write_profile as write

    m = result["measurements"]
    source = m[0]["source"] if m else "cgroup"
    what = ("each chunk's cgroup peak, what its memory limit sees" if source == "cgroup" else
            "the process tree's RSS: the chunks had no memory cgroup of their own")
    notes = [
        f"For job {p.spec.name} ({p.spec.path}). Measured ({what}): "
        + ", ".join(f"{x['size']} items {format_size(x['peak'])}" for x in m) + ".",
        f"Fit: peak = base {format_size(int(result['base_bytes']))} "
        f"({result['base_bytes']} bytes) {term(result['per_item_bytes'], 'bytes')} per item "
        f"(largest error {result['fit_error']:.1%}).",
        f"chunk_size {result['chunk_size']}: predicted peak "
        f"{format_size(result['predicted_chunk_peak_bytes'])}; workers.memory = that x "
        f"{result['margin']:.2f}. No jobs.max_concurrent: the machine that runs the job sets "
        f"it (`launcher jobs plan`)."]
    write(path, p.resolved.profile, "launcher bench-memory", {
        "workers": {"memory": result["workers_memory"]},
        "jobs": {"chunk_size": result["chunk_size"]}}, notes)


def result_of(p: Prepared, ms: list[Measurement], predict: int | None,
              concurrent: dict[str, Any] | None, target: Prepared | None = None) -> dict[str, Any]:
    """The fit and what follows from it; `target`: the job planned for the profile's machine
    (its GPUs, its memory), which sets the chunk size and the concurrency, not this host."""
    p = target or p
    base, per, err = fit([(m.size, m.peak) for m in ms])
    size = choose_chunk_size(p, base, per)
    chunk_peak = base + per * size
    margin = max(MARGIN, 1 + err)
    memory = math.ceil(chunk_peak * margin / 2**20) * 2**20  # whole MiB: shown as written
    bounds = {"GPU slots" if p.plan.gpus[0] is not None else "CPU slots": p.plan.slots}
    if p.plan.usable_bytes:
        bounds[f"memory ({format_size(p.plan.usable_bytes)} usable / "
               f"{format_size(memory)})"] = max(1, p.plan.usable_bytes // memory)
    pids = {k: v for k, v in p.plan.bounds.items() if k.startswith("the pids")}
    bounds.update(pids)
    binding, concurrency = min(bounds.items(), key=lambda kv: kv[1])
    out: dict[str, Any] = {
        "measurements": [{**asdict(m), "peak": m.peak, "source": m.source} for m in ms],
        "base_bytes": round(base), "per_item_bytes": per, "fit_error": round(err, 4),
        "chunk_size": size, "predicted_chunk_peak_bytes": round(chunk_peak),
        "margin": round(margin, 3), "workers_memory_bytes": memory,
        "workers_memory": f"{memory >> 20}MiB",
        "max_concurrent": concurrency, "concurrency_binding": f"{concurrency} (set by "
                                                             f"{binding})",
    }
    if predict:
        out["predict_items"] = predict
        out["predicted_peak_bytes"] = round(base + per * predict)
    if concurrent:
        out["concurrent"] = concurrent
    return out
