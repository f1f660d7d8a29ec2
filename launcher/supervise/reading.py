"""The watch's reading of the workload's output, within a CPU budget: at most SHARE of a core
over the run (after a first BURST_S), measured with time.thread_time around each read. The
bytes have passed on already (pump.py); a read over the budget is skipped, not delayed, so
the workload never waits for the watch, and the record says how much was skipped.

A skipped read still costs a `bytes.rfind` (in C) for each word that marked the run's
cycles so far, as printed (`Epoch`): the last such line is read, so a training run's cycles
are counted among any noise. The last TAIL bytes skipped on each stream are read at the end for the
failure words (a run that dies says why in its last lines). Each stream has half the budget,
so a quiet one (stderr's traceback) is read beside a loud one. A cycle's own work (its
sample, the fit: per cycle, not per byte) is not the reading's (`aside`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

SHARE = 0.02  # of a core, averaged over the run: half for each stream (stdout, stderr)
BURST_S = 0.05  # CPU seconds the first reads may take before the share applies
TAIL = 256 << 10  # bytes skipped last on each stream, kept to read at the end
FIRST_WORDS_BYTES = 4 << 20  # skipped bytes searched for any unit's word until one is known (a
# 64 KiB read of random bytes costs ~1 ms for all of them)
FOUND = ":found"  # the stream a skipped read's found lines are read on (their own partial)


@dataclass
class Account:
    """One stream's reading: its CPU and bytes, and the last it skipped (for the end)."""

    spent: float = 0.0
    read_bytes: int = 0
    skipped_bytes: int = 0
    skipped_reads: int = 0
    tail: list[bytes] = field(default_factory=list)
    tail_bytes: int = 0
    whole: bool = True  # its last read ended a line


@dataclass
class Reading:
    """`read(stream, data)`: the watch's full reading; `skip(stream, data)`: what it is told
    of a read it does not get (its line cut); `late(stream, data)`: the end's reading of a
    stream's skipped tail; `words()`: the words (as printed) to find in a skipped read;
    `first_words`: those looked for until `words()` gives any, in the first
    FIRST_WORDS_BYTES skipped (on a busy host the budget can run out before the first cycle's
    line is read whole, and then none would be learned)."""

    read: Callable[[str, bytes, float | None], None]  # (stream, data, when it was read)
    skip: Callable[[str, bytes, float | None], None]
    late: Callable[[str, bytes], None]
    words: Callable[[], Iterable[bytes]] = tuple
    first_words: tuple[bytes, ...] = ()
    share: float = SHARE
    burst: float = BURST_S
    clock: Callable[[], float] = time.monotonic
    cpu: Callable[[], float] = time.thread_time
    started: float = field(default=-1.0)
    aside: Callable[[], float] = float  # CPU seconds of the cycles' work so far (their
    # samples, the fit: per cycle, not per byte), which is not reading's
    found_lines: int = 0  # lines read out of skipped reads (a cycle's word in them)
    accounts: dict[str, Account] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.started < 0:
            self.started = self.clock()

    def credit(self, a: Account) -> float:
        """CPU seconds a stream's reading may still take now (negative: a debt): each
        stream has half, so a quiet one (stderr's traceback) is read beside a loud one."""
        return (self.burst + self.share * (self.clock() - self.started)) / 2 - a.spent

    def output(self, stream: str, data: bytes, came: float | None = None) -> None:
        a = self.accounts.get(stream) or self.accounts.setdefault(stream, Account())
        t, aside = self.cpu(), self.aside()
        try:
            if self.credit(a) >= 0:
                a.read_bytes += len(data)
                self.read(stream, data, came)
            else:
                a.skipped_bytes += len(data)
                a.skipped_reads += 1
                self._skipped(stream, data, a, came)
        finally:
            a.whole = data[-1:] == b"\n"
            a.spent += self.cpu() - t - (self.aside() - aside)

    def _skipped(self, stream: str, data: bytes, a: Account, came: float | None) -> None:
        self.skip(stream, data, came)
        a.tail.append(data)
        a.tail_bytes += len(data)
        while a.tail_bytes - len(a.tail[0]) >= TAIL:
            a.tail_bytes -= len(a.tail.pop(0))
        words = tuple(self.words()) or (
            self.first_words if a.skipped_bytes <= FIRST_WORDS_BYTES else ())
        lines = found_lines(data, words, whole=a.whole)
        if lines:
            self.found_lines += len(lines)
            self.read(stream + FOUND, b"".join(lines), came)

    def close(self) -> None:
        """The end: each stream's last skipped bytes read for the failure words."""
        for stream, a in self.accounts.items():
            if a.tail:
                t = self.cpu()
                data = b"".join(a.tail)[-TAIL:]
                self.late(stream, data[data.find(b"\n") + 1:] + b"\n")
                a.tail, a.tail_bytes = [], 0
                a.spent += self.cpu() - t

    def record(self) -> dict[str, Any]:
        """For the run record (summary.json's growth.output)."""
        acc = self.accounts.values()
        return {"read_bytes": sum(a.read_bytes for a in acc),
                "skipped_bytes": sum(a.skipped_bytes for a in acc),
                "skipped_reads": sum(a.skipped_reads for a in acc),
                "found_lines": self.found_lines,
                "cpu_s": round(sum(a.spent for a in acc), 4), "share": self.share}


def found_lines(data: bytes, words: Iterable[bytes], *, whole: bool = True) -> list[bytes]:
    """The last whole line of `data` holding each word (an `rfind` in C: the latest cycle is
    the one that counts), ending in a newline; a line cut by the read's edge is not whole,
    and the one before it is read instead (`whole`: `data` begins a line)."""
    out: list[bytes] = []
    for word in words:
        end = len(data)
        while True:  # (no walrus: an image's python3 may be 3.7, which compiles this)
            p = data.rfind(word, 0, end)
            if p < 0:
                break
            stop = data.find(b"\n", p)
            start = max(data.rfind(b"\n", 0, p), data.rfind(b"\r", 0, p))
            if stop >= 0 and (start >= 0 or whole):
                out.append(data[start + 1:stop + 1])
                break
            end = start + 1 if start >= 0 else 0  # cut: the line before
    return out


def printed_words(examples: dict[str, str], units: Iterable[str]) -> tuple[bytes, ...]:
    """The words of familiar units (`units`) that marked cycles, as their first line printed
    them (`Epoch 2/10`: b"Epoch")."""
    out = []
    for unit in units:
        line = examples.get(unit)
        at = line.lower().find(unit) if line else -1
        if line and at >= 0:
            out.append(line[at:at + len(unit)].encode())
    return tuple(out)


def for_watch(watch: Any) -> Reading:
    """The reading of a GrowthWatch's output: a skipped read's line cut kept, the lines of
    its cycles' words read, its tail read for failure words at the end; a cycle's boundary
    (its sample, the fit) timed aside."""
    from launcher.telemetry.cycles import UNITS

    words: list[Any] = [0, ()]  # (the examples counted, their words): made when one comes

    def cycle_words() -> tuple[bytes, ...]:
        if len(watch.marks.example) != words[0]:
            words[:] = [len(watch.marks.example), printed_words(watch.marks.example, UNITS)]
        return words[1]  # type: ignore[no-any-return]

    first = tuple(w for unit in UNITS for w in (unit.encode(), unit.capitalize().encode()))
    return Reading(watch.output, watch.lines.skip,
                   lambda stream, data: watch.failure.feed(data, stream), cycle_words,
                   first_words=first, aside=lambda: watch.cycle_cpu)
