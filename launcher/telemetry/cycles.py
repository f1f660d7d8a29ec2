"""A run's cycles (folds, epochs, iterations, steps, any counter), read from the workload's own
output.

Pure: output in, boundaries out (read by shape, in whole chunks: scan.py). Familiar words
(`fold 3`, `Epoch 2/10`, `iteration 7`...) are a fast path; any other line that repeats with
a number going up by one (in any words, or a bare number) is a counter too, once it has
counted twice. Progress-bar redraws (`\\r`), timestamps, decimals, sizes and durations are
never counters. A user's own pattern (`--cycle`, the profile's `growth.cycle`) replaces all of
it. Where no line marks a cycle, time does (the watcher's job, launcher/telemetry/timeline.py).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from launcher.telemetry.scan import Chunk, Lines

# "fold 3", "Fold 3/5", "fold: 3 of 5", "Epoch 2/10" (Keras), "cycle 12", "step 400"
_COUNT = r"\s*[#:=]?\s*(?P<n>\d+)(?:\s*(?:/|of)\s*(?P<total>\d+))?"
# the outer loop first: a fold holds epochs, an epoch holds batches and steps
UNITS = ("fold", "trial", "round", "generation", "cycle", "epoch", "validation", "iteration",
         "iter", "batch", "step")
DEFAULT_PATTERNS = {unit: re.compile(rf"\b{unit}{_COUNT}(?!\.?\d)", re.IGNORECASE)
                    for unit in UNITS}
CUSTOM = "cycle"  # the unit a user's own pattern counts in
WINDOW = "window"  # the unit of time windows, where nothing marked a cycle
COUNTER = "count"  # a bare number's unit (a counter without a word before it)

# what is a number in a line, and what only looks like one: a time (12:04:05), a date
# (2026-11-27), a decimal or exponent (0.25, 1e-3), a size or duration (12MB, 3s, 40ms, 98%),
# a name's digits (conv2d_3); a hex number's (0x7f) are a 0 and a name
_NUMBER = re.compile(
    r"\d+(?:[:-]\d+)*(?:[.,]\d+)*(?:[eE][+-]?\d+)?(?:\s?(?:[KMGTP]i?B|[kKMGTP]|B|bytes|"
    r"ms|us|ns|s|secs?|min|h|it/s|s/it)\b|%)?|[A-Za-z_]\w*|[^A-Za-z0-9_]+", re.ASCII)
MAX_COUNTER_LINE = 512  # longer lines (a dump, a table) are no counter's
_PLAIN = re.compile(r"\d+")
MIN_CHANGES = 2  # a counter has counted up this many times before it marks a cycle
MAX_TEMPLATES = 256  # lines of other shapes are forgotten past this (a log of unique lines)


@dataclass(frozen=True)
class Boundary:
    """A cycle began: its unit, its number as printed (or counted), the total when printed."""

    unit: str
    n: int
    total: int | None
    line: str
    came: float | None = field(default=None, compare=False)  # when its line began to come

    def to_json(self) -> dict[str, object]:
        return {"unit": self.unit, "n": self.n, "total": self.total, "line": self.line[:200]}


def compile_pattern(text: str) -> re.Pattern[str]:
    """A user's cycle pattern: a regular expression whose first group (or group `n`) is the
    cycle's number; without a group every matching line is the next cycle. ValueError says
    why one cannot be used."""
    from launcher.profiles.schema import _regex_problem

    why = _regex_problem(text)
    if why:
        raise ValueError(why)
    return re.compile(text)


def shape(line: str) -> tuple[str, list[int], list[str]] | None:
    """(the line with each plain whole number as `#`, those numbers, the word before each),
    or None where it has none. A number that is a time, date, decimal, size, duration or part
    of a name is kept as text: it never counts."""
    if len(line) > MAX_COUNTER_LINE or not any(c.isdigit() for c in line):
        return None
    parts: list[str] = []
    numbers: list[int] = []
    words: list[str] = []
    word = ""
    for m in _NUMBER.finditer(line):
        tok = m.group()
        if tok[0].isdigit() and _PLAIN.fullmatch(tok) and len(tok) < 10:
            parts.append("#")
            numbers.append(int(tok))
            words.append(word)
        elif tok[0].isdigit():
            parts.append("~")  # a time, a size, a decimal: other values, the same shape
        else:
            parts.append(tok)
            if tok[0].isalpha():
                word = tok.lower()
    return ("".join(parts), numbers, words) if numbers else None


@dataclass
class _Position:
    """One number's place in lines of one shape: how it moved from line to line."""

    last: int
    stride: int = 0  # its step up, once seen (1, or 10, 100... for every 10th)
    changes: int = 0  # steps up by the stride
    broken: bool = False  # it moved otherwise: no counter

    def run(self, first: int, last: int, lines: int) -> bool:
        """`lines` more lines of its shape, the first with `first` here and the last with
        `last`: whether it counted up by its stride on each (the lines between are not read:
        a counter's last is its first plus the stride for each)."""
        start, self.last = self.last, last
        if lines == 1 or first == start:
            step = last - start if lines == 1 else None
        else:
            step = first - start
        total = last - start
        if total == 0 and step in (0, None):
            return False
        if total < 0 or (step is not None and step < 0) or last < first:
            # an inner loop starts again (at 0 or 1, its stride); anything else is no counter
            self.broken = self.broken or last > max(self.stride, 1) * lines
            return False
        each, uneven = divmod(total, lines)
        stride = self.stride or (each if not uneven and (
            each == 1 or (_power_of_ten(each) and last % each == 0)) else 0)
        if stride and total == stride * lines and step in (None, stride):
            self.stride, self.changes = stride, self.changes + lines
            return True
        self.broken = True
        return False


_WORDED = re.compile(rb"\b(?:" + b"|".join(u.encode() for u in UNITS) + rb")\s*[#:=]?\s*#")
MAX_KINDS = 4096  # rough shapes remembered (what each holds), at most
BY_WORD, NUMBERS, SKIP = "words", "numbers", "skip"  # a familiar word; a counter maybe; neither


@dataclass
class LineCounters:
    """Lines of the same shape, and each number's place in them: a place whose number only
    goes up by its stride (1, or a power of ten it divides), or starts again at 0 or 1 (an
    inner loop), is a counter once it has counted up MIN_CHANGES times."""

    shapes: dict[str, list[_Position]] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)  # shape -> its unit, once a counter

    def line(self, line: str) -> Boundary | None:
        got = shape(line)
        return None if got is None else self._lines(got, got, 1, line)

    def read(self, first_raw: bytes, last_raw: bytes, count: int) -> Boundary | None:
        """`count` lines of one rough shape in a chunk, its first and last as written."""
        first_line = first_raw.decode(errors="replace")
        last_line = last_raw.decode(errors="replace") if count > 1 else first_line
        a, b = shape(first_line), shape(last_line)
        if a is None or b is None:
            return None
        if a[0] != b[0] or len(a[1]) != len(b[1]):  # two shapes after all: each alone
            return self._lines(b, b, 1, last_line) or self._lines(a, a, 1, first_line)
        return self._lines(a, b, count, last_line)

    def _lines(self, a: tuple[str, list[int], list[str]], b: tuple[str, list[int], list[str]],
               count: int, line: str) -> Boundary | None:
        """`count` lines of one shape, the first read as `a`, the last as `b`."""
        key, firsts, _ = a
        _, lasts, words = b
        places = self.shapes.get(key)
        if places is None or len(places) != len(firsts):
            if len(self.shapes) >= MAX_TEMPLATES:
                self.shapes.clear()
            self.shapes[key] = places = [_Position(n) for n in firsts]
            count -= 1  # the first line sets where each number starts
            if count == 0:
                return None
        counted = None
        for i, (p, lo, hi) in enumerate(zip(places, firsts, lasts)):
            if p.run(lo, hi, count) and counted is None and not p.broken and (
                    p.changes >= MIN_CHANGES):
                counted = i
        if counted is None:
            return None
        word = words[counted]
        unit = self.units.setdefault(key, word if word and word != WINDOW else COUNTER)
        return Boundary(unit, lasts[counted], None, line.strip())


def _power_of_ten(k: int) -> bool:
    return k >= 10 and str(k).rstrip("0") == "1"


class CycleMarks:
    """Feed it the workload's output as it comes; it returns the boundaries the lines mark.
    A boundary is a higher number for a unit, or 1 again (a line repeating "fold 2", or
    naming an earlier fold, marks nothing).

    Whole chunks are read by shape (launcher/telemetry/scan.py): a shape that holds a familiar
    word, or numbers that may count, has its first and last line in the chunk read; the lines
    between are not (lines that came at once are one moment: a counter's last is its first
    plus its stride for each line between). A user's pattern is searched over the chunk."""

    def __init__(self, pattern: re.Pattern[str] | None = None) -> None:
        self.patterns = {CUSTOM: pattern} if pattern is not None else dict(DEFAULT_PATTERNS)
        self.custom = (re.compile(pattern.pattern, pattern.flags | re.MULTILINE)
                       if pattern is not None else None)
        self.counters = LineCounters() if pattern is None else None
        self.lines = Lines()
        self.kinds: dict[bytes, str] = {}  # rough shape -> BY_WORD, NUMBERS or SKIP
        self.last: dict[str, int] = {}
        self.counted = 0  # a pattern without a number: the lines it matched
        self.unnumbered: str | None = None  # a line whose group was no number (said once)
        self.example: dict[str, str] = {}  # unit -> the first line that marked it

    @property
    def partial(self) -> dict[str, bytes]:
        return self.lines.partial

    def feed(self, stream: str, data: bytes) -> list[Boundary]:
        return self.scan(*self.lines.feed(stream, data))

    def scan(self, chunk: Chunk | None, drawn: list[bytes]) -> list[Boundary]:
        """The boundaries of a chunk of whole lines, then of a progress bar's redraws."""
        out: list[Boundary] = []
        for part in chunk.parts() if chunk is not None else ():
            marked = self._custom(part.own) if self.custom else self._shapes(part)
            out += [replace(b, came=part.came) for b in marked] if part.came is not None else marked
        for piece in drawn:
            if self.custom:
                out += self._custom(piece)
            else:  # no walrus: an image's python3 3.7 compiles this module (compileall)
                b = self.line(piece.decode(errors="replace"), counters=False)
                out += [b] if b is not None else []
        return out

    def _kind(self, key: bytes) -> str:
        kind = self.kinds.get(key)
        if kind is None:
            if len(self.kinds) >= MAX_KINDS:
                self.kinds.clear()
            kind = self.kinds[key] = (
                BY_WORD if _WORDED.search(key.lower()) else
                SKIP if b"#" not in key or b"\r" in key or len(key) > MAX_COUNTER_LINE
                else NUMBERS)
        return kind

    def _shapes(self, chunk: Chunk) -> list[Boundary]:
        out: list[Boundary] = []
        for key, count in chunk.counts.items():
            kind = self._kind(key)
            if kind == SKIP:
                continue
            first = chunk.line(key)
            last = chunk.line(key, last=True) if count > 1 else first
            if kind == BY_WORD:
                for raw in (first, last) if count > 1 else (first,):
                    for piece in raw.split(b"\r"):
                        b = self.line(piece.decode(errors="replace"), counters=False)
                        if b is not None:
                            out.append(b)
                continue
            if chunk.redrawn_first and chunk.first_is(key):
                continue  # the end of a progress bar's line: no counter
            assert self.counters is not None
            b = self.counters.read(first, last, count)
            if b is not None and self._marks(b.unit, b.n):
                out.append(self._mark(b))
        return out

    def _custom(self, text: bytes) -> list[Boundary]:
        """A user's pattern, over the chunk: each line it matches, read as a line."""
        assert self.custom is not None
        decoded = text.decode(errors="replace")
        out, seen = [], set()
        for m in self.custom.finditer(decoded):
            start = max(decoded.rfind("\n", 0, m.start()), decoded.rfind("\r", 0, m.start())) + 1
            if start in seen:
                continue
            seen.add(start)
            end = min((i for i in (decoded.find("\n", start), decoded.find("\r", start))
                       if i >= 0), default=len(decoded))
            b = self.line(decoded[start:end])
            if b is not None:
                out.append(b)
        return out

    def line(self, line: str, *, counters: bool = True) -> Boundary | None:
        """One line, read alone (a user's pattern's; tests)."""
        worded = False
        for unit, pattern in self.patterns.items():
            m = pattern.search(line)
            if m is None:
                continue
            worded = True
            n, total = self._number(m)
            if n is None:
                self.unnumbered = self.unnumbered or line.strip()[:120]
            elif self._marks(unit, n):
                return self._mark(Boundary(unit, n, total, line.strip()))
        if counters and not worded and self.counters is not None:
            b = self.counters.line(line)
            if b is not None and self._marks(b.unit, b.n):
                return self._mark(b)
        return None

    def _marks(self, unit: str, n: int | None) -> bool:
        """A new cycle counts up, or starts again at 1 inside an outer loop (epochs within
        each fold); a line that names an earlier one ("checkpoint written after cycle 3")
        marks nothing."""
        last = self.last.get(unit)
        return n is not None and not (last is not None and n <= last and not (
            n <= 1 and last > 1 and self._inner(unit)))

    def _mark(self, b: Boundary) -> Boundary:
        self.last[b.unit] = b.n
        self.example.setdefault(b.unit, b.line[:120])
        return b

    def _inner(self, unit: str) -> bool:
        """Whether a loop outside `unit` has marked a cycle (folds around epochs; any
        counter's own restart)."""
        if unit not in UNITS:
            return True
        return any(u in self.last for u in UNITS[:UNITS.index(unit)])

    def _number(self, m: re.Match[str]) -> tuple[int | None, int | None]:
        groups = m.groupdict()
        if "n" in groups:
            raw, total = groups["n"], groups.get("total")
        elif m.groups():  # a second group is the total only where it is a whole number
            raw, total = m.group(1), m.group(2) if len(m.groups()) > 1 else None
        else:
            self.counted += 1
            return self.counted, None
        try:
            n = int(raw)
        except (TypeError, ValueError):
            return None, None
        return n, int(total) if total and total.isdigit() else None


MIN_MARKS = 2  # a unit's lines before it is the run's cycles (one line alone is no loop)


def active_unit(units: Iterable[str]) -> str | None:
    """The unit a run's cycles are counted in (`units`: each boundary's, in order): the
    outermost loop that marked two cycles or more, a familiar word's before any other
    counter's (of those, the one that counted least: the outer loop); time windows only where
    nothing else did. A user's pattern's unit counts from its first line."""
    seen = Counter(units)
    familiar = [u for u in UNITS if seen[u] >= MIN_MARKS or (u == CUSTOM and seen[u])]
    if familiar:
        return familiar[0]
    other = [u for u, k in seen.items() if u not in UNITS and u != WINDOW and k >= MIN_MARKS]
    if other:
        return min(other, key=lambda u: (seen[u], u))
    return WINDOW if seen[WINDOW] else None
