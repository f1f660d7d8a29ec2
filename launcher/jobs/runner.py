"""The pull queue: every slot takes the next pending chunk from the ledger when it is free, so
a cap below the GPU count strands nothing, and a chunk runs on whichever slot frees first.
A chunk the OOM killer took is split in half (down to the spec's minimum) and its halves go
back in the queue; any other failure is tried again `retries` times, then marked failed with
its one-sentence diagnosis and the tail of its log."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from launcher.jobs.execute import Outcome
from launcher.jobs.ledger import Chunk, Ledger
from launcher.jobs.plan import JobPlan
from launcher.jobs.spec import JobSpec
from launcher.units import format_size

FAIL_FAST = 3  # failed chunks, with none done, that stop a job


def last_words(log_tail: str) -> str:
    """The workload's last line of output (not launcher's own), e.g. the exception."""
    for line in reversed(log_tail.splitlines()):
        if line.strip() and not line.startswith("launcher: "):
            return line.strip()[:300]
    return ""


def join_stoppable(threads: list[threading.Thread],
                   on_signal: Callable[[int, object], None]) -> None:
    """Start `threads` and wait for them with SIGINT and SIGTERM going to `on_signal` (the
    main thread wakes every 0.2 s to take a signal), the handlers as they were afterwards."""
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(timeout=0.2)
    finally:
        for s, h in old.items():
            signal.signal(s, h)

class Progress(Protocol):
    """What the queue tells whoever shows progress (the CLI's bar or lines)."""

    def running(self, delta: int) -> None: ...

    def ended(self, what: str, line: str, items: int = 0) -> None: ...


class Executor(Protocol):
    def execute(self, chunk: Chunk, gpu: int | None, stopping: threading.Event) -> Outcome: ...

    def stop_all(self, sig: int = 15) -> None: ...


@dataclass(frozen=True)
class Slot:
    name: str
    gpu: int | None


class PullQueue:
    def __init__(self, spec: JobSpec, plan: JobPlan, *, ledger: Ledger, executor: Executor,
                 progress: Progress, runner_id: str, slots: list[Slot] | None = None,
                 say: Callable[[str], None] = lambda _msg: None,
                 rerun: str = "launcher jobs run SPEC") -> None:
        self.say, self.rerun = say, rerun  # rerun: the command that goes on with the job
        self.spec, self.plan, self.ledger = spec, plan, ledger
        self.executor, self.progress, self.runner_id = executor, progress, runner_id
        self.slots = slots or [Slot(f"slot{i}", gpu) for i, gpu in enumerate(plan.gpus)]
        self.stopping = threading.Event()
        self.changed = threading.Condition()
        self.in_flight = 0
        self.busy: dict[str, float] = {s.name: 0.0 for s in self.slots}
        self.errors: list[BaseException] = []
        self.gave_up = False

    def run(self) -> bool:
        """Run until no chunk is pending or running; False when stopped (Ctrl-C, SIGTERM)."""
        join_stoppable([threading.Thread(target=self._slot, args=(s,), name=f"launcher-{s.name}",
                                         daemon=True) for s in self.slots], self._stop)
        if self.errors:
            raise self.errors[0]
        return self.gave_up or not self.stopping.is_set()

    def _stop(self, signum: int, _frame: object) -> None:
        if self.stopping.is_set():
            self.executor.stop_all(signal.SIGKILL)
            return
        self.stopping.set()
        self.say(f"{signal.Signals(signum).name}: stopping the running chunks; to go on: "
                 f"`{self.rerun}`")
        self.executor.stop_all(signal.SIGTERM)
        with self.changed:
            self.changed.notify_all()

    def _next(self, slot: Slot) -> Chunk | None:
        with self.changed:
            while not self.stopping.is_set():
                chunk = self.ledger.claim(slot.name, slot.gpu, self.runner_id)
                if chunk is not None:
                    self.in_flight += 1
                    return chunk
                if self.in_flight == 0:
                    return None  # nothing pending, nothing that could split
                self.changed.wait(timeout=1.0)
            return None

    def _slot(self, slot: Slot) -> None:
        try:
            while (chunk := self._next(slot)) is not None:
                self.progress.running(+1)
                started = time.monotonic()
                ended = False
                try:
                    outcome = self.executor.execute(chunk, slot.gpu, self.stopping)
                    self.progress.running(-1)  # before the line that says how it ended
                    ended = True
                    self._record(chunk, outcome)
                finally:
                    self.busy[slot.name] += time.monotonic() - started
                    if not ended:
                        self.progress.running(-1)
                    with self.changed:
                        self.in_flight -= 1
                        self.changed.notify_all()
        except BaseException as exc:  # noqa: BLE001 - a bug in a slot ends the whole job
            self.errors.append(exc)
            self.stopping.set()
            self.executor.stop_all(signal.SIGTERM)

    def _record(self, chunk: Chunk, o: Outcome) -> None:
        items = f"items {chunk.start}-{chunk.end}"
        where = f" on GPU {o.gpu}" if o.gpu is not None else ""
        if o.status == 0:
            self.ledger.finish(chunk.id, "done", exit_status=0, diagnosis=o.diagnosis,
                               peak=o.peak)
            self.progress.ended("done", f"chunk {chunk.id} ({items}) done{where}", chunk.size)
        elif o.interrupted:
            self.ledger.interrupted(chunk.id, o.status, o.peak)
        elif o.oom and chunk.size > self.plan.min_chunk_size:
            halves = self.ledger.split(chunk, o.diagnosis, o.peak)
            peak = f" (peak {format_size(o.peak)})" if o.peak else ""
            text = (f"chunk {chunk.id} ({items}) was killed by its memory limit{peak}; split "
                    f"into chunks {halves[0].id} ({halves[0].start}-{halves[0].end}) and "
                    f"{halves[1].id} ({halves[1].start}-{halves[1].end}).")
            self.ledger.event(chunk.id, "split", text)
            self.progress.ended("split", text)
        elif chunk.attempts <= self.spec.retries:
            self.ledger.finish(chunk.id, "pending", exit_status=o.status,
                               diagnosis=o.diagnosis, peak=o.peak, log_tail=o.log_tail)
            text = (f"chunk {chunk.id} ({items}) failed{where}: {o.diagnosis} Trying again "
                    f"({chunk.attempts} of {self.spec.retries + 1} attempts used).")
            self.ledger.event(chunk.id, "retry", text)
            self.progress.ended("retried", text)
        else:
            why = o.diagnosis
            if o.oom:
                why += (f" It is already at the minimum chunk size "
                        f"({self.plan.min_chunk_size} items).")
            last = last_words(o.log_tail)
            if last:
                why += f" Its last line: {last}"
            self.ledger.finish(chunk.id, "failed", exit_status=o.status, diagnosis=why,
                               peak=o.peak, log_tail=o.log_tail)
            text = f"chunk {chunk.id} ({items}) failed{where}: {why}"
            self.ledger.event(chunk.id, "failed", text)
            self.progress.ended("failed", text)
            self._fail_fast()

    def _fail_fast(self) -> None:
        """Every chunk failing the same way (a missing module, a typo in the command): stop
        after a few instead of burning through all of them."""
        counts = self.ledger.counts()
        if counts["done"] == 0 and counts["failed"] >= FAIL_FAST and not self.stopping.is_set():
            self.stopping.set()
            self.gave_up = True
            self.say(f"the first {counts['failed']} chunks failed and none succeeded: stopping "
                     f"(the rest stay pending; fix the cause, then `{self.rerun}`)")
            with self.changed:
                self.changed.notify_all()


def lock_job(folder_lock: str) -> Callable[[], None]:
    """Hold an exclusive lock on the job folder for this launcher's life; a second launcher on
    the same job gets a one-line error."""
    import fcntl
    import os

    from launcher.errors import LauncherError

    fd = os.open(folder_lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 200).decode(errors="replace").strip() or "another launcher"
        os.close(fd)
        raise LauncherError(f"{holder} is running this job already ({folder_lock})") from None
    from launcher.runtime.owner import owner

    os.ftruncate(fd, 0)
    os.write(fd, f"launcher {owner()}".encode())

    def release() -> None:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    return release
