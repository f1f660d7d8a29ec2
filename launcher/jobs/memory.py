"""`launcher bench-memory`: the real worker (framework and GPU init included) at several chunk
sizes, each in its own capped cgroup; its peak is the cgroup's counter, what the chunk's memory
limit sees (the process tree's RSS only beside it, labelled, or where the chunk had no memory
cgroup of its own); a fit peak = base + per_item x size with its error; N workers at once
(peaks are not additive); and a profile that extends the given one with what was measured
(the fit, the chunk size, workers.memory), and nothing of the measuring host's CPUs or GPUs."""

from __future__ import annotations

import math
import signal
import statistics
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from launcher.errors import LauncherError
from launcher.jobs.execute import LocalExecutor, Outcome, chunk_dir
from launcher.jobs.job import Prepared
from launcher.jobs.ledger import Chunk
from launcher.jobs.runner import join_stoppable
from launcher.units import format_size, term

MARGIN = 1.10  # workers.memory over the predicted peak (at least the fit's error)
MAX_FIT_ERROR = 0.25  # a line that misses a measured peak by more is refused
SAMPLE_S = 0.05


@dataclass(frozen=True)
class Fit:
    """peak = base + per_item x size; refused (a reason): no per-item term, and base the
    largest peak measured, which holds up to the largest size measured and no further."""

    base: float
    per_item: float
    error: float  # the line's largest relative error at the measured sizes
    largest: int
    refused: str | None = None

    def peak(self, size: int) -> float | None:
        if self.refused and size > self.largest:
            return None
        return self.base + self.per_item * size


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

    return LocalExecutor(p.spec, p.resolved, engine=first_that("runs_host_processes"),
                         folder=folder, image=None, cwd=p.spec.path.resolve().parent,
                         items=items, memory_limit=cap)


def measure(p: Prepared, sizes: list[int], folder: Path, items: list[str] | None,
            say: Any = None) -> list[Measurement]:
    """Each size alone, on the first GPU of the plan (one GPU visible, as in a job), after a
    warm-up run of the smallest size that is thrown away: the first run reads the framework's
    files from disk, and that page cache is charged to its cgroup's peak (369 MiB for a
    worker whose later runs peak at 150); the runs after it find the files cached."""
    for size in sizes:
        if size > p.spec.items:
            raise LauncherError(f"--sizes: {size} is more than the job's {p.spec.items} items")
    ex = _executor(p, folder, items, p.plan.usable_bytes)
    first = sizes.index(min(sizes))
    _one(ex, p, min(sizes), 1_000_000 + first, folder)  # the warm-up: discarded
    out = []
    for k, size in enumerate(sizes):
        m = _one(ex, p, size, 1_000_000 + k, folder)
        if say:
            say(m.sentence())
        out.append(m)
    return out


def _one(ex: LocalExecutor, p: Prepared, size: int, chunk_id: int,
         folder: Path) -> Measurement:
    """The worker at one size, alone; a failure is one line with its cause and its log."""
    rss = TreeRss()
    rss.start()
    started = time.monotonic()
    try:
        [o] = run_stoppable(ex, [(Chunk(chunk_id, 0, size), p.plan.gpus[0])],
                            lambda info: info.pid and rss.add(info.pid))
    finally:
        rss.stop()
    if o.status != 0:
        raise LauncherError(f"the worker failed at {size} items: {failure(o)} (log: "
                            f"{chunk_dir(folder, chunk_id) / 'log.txt'})")
    return Measurement(size, o.cgroup_peak, max(rss.pids.values(), default=0),
                       round(time.monotonic() - started, 3), o.status, o.diagnosis)


def run_stoppable(ex: LocalExecutor, runs: list[tuple[Chunk, int | None]],
                  observe: Any = None) -> list[Outcome]:
    """The chunks at once, each on a thread of its own, so that Ctrl-C or SIGTERM reaches
    launcher rather than being forwarded to one worker as a failure: the workers are stopped
    (SIGTERM; SIGKILL at a second signal), their cgroups go with them, and KeyboardInterrupt
    (`interrupted`, exit 130) follows once they have ended."""
    stopping = threading.Event()
    outcomes: list[Outcome | None] = [None] * len(runs)
    errors: list[BaseException] = []

    def one(k: int) -> None:
        try:
            outcomes[k] = ex.execute(runs[k][0], runs[k][1], stopping, observe=observe)
        except BaseException as exc:  # noqa: BLE001 - raised on the main thread below
            errors.append(exc)

    def stop(_signum: int, _frame: object) -> None:
        again = stopping.is_set()
        stopping.set()  # first: a worker starting now sees it and stops at once
        ex.stop_all(signal.SIGKILL if again else signal.SIGTERM)

    join_stoppable([threading.Thread(target=one, args=(k,), daemon=True)
                    for k in range(len(runs))], stop)
    if stopping.is_set():
        raise KeyboardInterrupt
    if errors:
        raise errors[0]
    return [o for o in outcomes if o is not None]


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
    gpus = p.plan.gpus
    try:
        outcomes = run_stoppable(ex, [(Chunk(2_000_000 + k, 0, size), gpus[k % len(gpus)])
                                      for k in range(n)],
                                 lambda info: info.pid and rss.add(info.pid))
    finally:
        rss.stop()
    for k, o in enumerate(outcomes):
        if o.status != 0:
            raise LauncherError(f"--concurrent {n}: a worker failed: {failure(o)} (log: "
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


def robust_fit(points: list[tuple[int, int]]) -> Fit:
    """The line, unless the measurements refuse it: a peak that falls as the size grows (no
    worker's memory does: page cache or noise) or a line that misses a measured peak by more
    than MAX_FIT_ERROR. Refused, the fit has no per-item term: a chunk's peak is the largest
    measured, and holds only up to the largest size measured."""
    base, per, err = fit(points)
    largest = max(s for s, _ in points)
    seen = ", ".join(f"{s} items {format_size(v)}" for s, v in sorted(points))
    if per < 0:
        why = f"the peak does not grow with the size ({seen})"
    elif err > MAX_FIT_ERROR:
        why = (f"the line misses a measured peak by {err:.0%}, more than {MAX_FIT_ERROR:.0%} "
               f"({seen})")
    else:
        return Fit(base, per, err, largest)
    return Fit(float(max(v for _, v in points)), 0.0, err, largest, why)


def choose_chunk_size(p: Prepared, f: Fit) -> int | None:
    """The spec's chunk_size; for `auto`, the largest size whose predicted peak lets every
    slot run at once within the usable memory, and no more than an even share of the items.
    With no per-item term, no size beyond the largest measured (None: the spec's is)."""
    if p.spec.chunk_size:
        return p.spec.chunk_size if f.peak(p.spec.chunk_size) is not None else None
    slots = p.plan.slots
    size = math.ceil(p.spec.items / slots)
    if f.refused:
        size = min(size, f.largest)
    elif p.plan.usable_bytes and f.per_item > 0:
        fits = int((p.plan.usable_bytes / slots / MARGIN - f.base) / f.per_item)
        if fits < 1:
            raise LauncherError(f"even one item needs ~{format_size(int(f.base + f.per_item))}"
                                f"; {slots} slots of {format_size(p.plan.usable_bytes // slots)}"
                                f" cannot hold it: use fewer slots (--max-concurrent)")
        size = min(fits, size)
    else:
        return size
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
    if result["refused"]:
        model = (f"No per-item cost: {result['refused']}; a chunk's peak is the largest "
                 f"measured, {format_size(result['base_bytes'])}, for chunks of at most "
                 f"{result['largest_size']} items.")
    else:
        model = (f"Fit: peak = base {format_size(int(result['base_bytes']))} "
                 f"({result['base_bytes']} bytes) {term(result['per_item_bytes'], 'bytes')} per "
                 f"item (largest error {result['fit_error']:.1%}).")
    notes = [
        f"For job {p.spec.name} ({p.spec.path}). Measured ({what}) after a discarded warm-up "
        f"run: " + ", ".join(f"{x['size']} items {format_size(x['peak'])}" for x in m) + ".",
        model,
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
    (its GPUs, its memory), which sets the chunk size and the concurrency, not this host.
    `chunk_size` None: the spec's is beyond what a fit with no per-item term tells."""
    p = target or p
    f = robust_fit([(m.size, m.peak) for m in ms])
    size = choose_chunk_size(p, f)
    out: dict[str, Any] = {
        "measurements": [{**asdict(m), "peak": m.peak, "source": m.source} for m in ms],
        "base_bytes": round(f.base), "per_item_bytes": f.per_item, "fit_error": round(f.error, 4),
        "refused": f.refused, "largest_size": f.largest, "chunk_size": size,
        "spec_chunk_size": p.spec.chunk_size}
    if size is not None:
        out.update(_limit(p, f, size))
    if predict:
        peak = f.peak(predict)
        out["predict_items"] = predict
        out["predicted_peak_bytes"] = None if peak is None else round(peak)
    if concurrent:
        out["concurrent"] = concurrent
    return out


def _limit(p: Prepared, f: Fit, size: int) -> dict[str, Any]:
    """A chunk's memory limit at `size` (its predicted peak plus the margin, in whole MiB, as
    written) and how many such chunks the profile's machine holds at once."""
    chunk_peak = f.peak(size) or 0.0
    margin = MARGIN if f.refused else max(MARGIN, 1 + f.error)
    memory = math.ceil(chunk_peak * margin / 2**20) * 2**20  # whole MiB: shown as written
    bounds = {"GPU slots" if p.plan.gpus[0] is not None else "CPU slots": p.plan.slots}
    if p.plan.usable_bytes:
        bounds[f"memory ({format_size(p.plan.usable_bytes)} usable / "
               f"{format_size(memory)})"] = max(1, p.plan.usable_bytes // memory)
    bounds.update({k: v for k, v in p.plan.bounds.items() if k.startswith("the pids")})
    binding, concurrency = min(bounds.items(), key=lambda kv: kv[1])
    return {"predicted_chunk_peak_bytes": round(chunk_peak), "margin": round(margin, 3),
            "workers_memory_bytes": memory, "workers_memory": f"{memory >> 20}MiB",
            "max_concurrent": concurrency,
            "concurrency_binding": f"{concurrency} (set by {binding})"}
