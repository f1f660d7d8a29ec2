"""The workload's output, read in whole chunks rather than line by line in Python.

Pure. Each chunk of whole lines gets a rough copy with every digit a `#` (translate, in C), so
lines of one shape (`epoch #/#`, `Process #, rank #: # open FDs`) are one key; the keys are
counted at once (collections.Counter, in C). What reads the output (cycles.py, failures.py)
then looks at each distinct shape, a handful a chunk, and at its first and last line: the
cost of a chunk is its size in C and its shapes in Python, never its lines.

A crowded chunk (more than MAX_SHAPES shapes: unique ids, random bytes, a file listing) has
only some shapes read: those of its stream's chunk before (a line that repeats across chunks:
a counter) or read before (`known`), and those of lines holding a word that cycles.py or
failures.py look for (NEEDLES, found by `bytes.find` in C). Its cost stays per byte.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import islice

_HASH = bytes.maketrans(b"0123456789", b"##########")
MAX_PARTIAL = 4096  # an unended line longer than this is dropped: no cycle or word in it
MAX_SHAPES = 64  # shapes read in a chunk, at most (each costs Python work)
MAX_KNOWN = 256  # shapes remembered across chunks (a stream's counters, words' lines)
MAX_DRAWN = 4  # a progress bar's redraws read in one read: the first and last two
# lowered words whose lines a crowded chunk keeps: cycles.py's units and failures.py's hints
# (tests/test_scan_budget.py checks they cover both)
NEEDLES = (b"fold", b"trial", b"round", b"generation", b"cycle", b"epoch", b"validation",
           b"iter", b"batch", b"step", b"can't start", b"pthread_create", b"thread creation",
           b"resource temp", b"failed to create thread", b"cannot allocate", b"bad_alloc",
           b"memoryerror", b"memory allocation", b"too many open", b"emfile")


@dataclass
class Chunk:
    """Whole lines of one stream, by shape: those of `done` from `start` to `end` (each ending
    in a newline; `done` is the read as it came, so no copy is made of it), after `head`, the
    line that the read before began."""

    done: bytes
    rough: bytes  # `done` with every digit a `#`: the same length, line for line
    counts: Counter[bytes]  # shape -> its lines in the chunk, in order of first appearance
    redrawn_first: bool = False  # the first line is the end of a progress bar's redraws
    crowded: int = 0  # the chunk's shapes, where more than MAX_SHAPES: only `counts` read
    start: int = 0
    end: int = -1  # -1: len(done)
    head: Chunk | None = None
    came: float | None = None  # when its first line began to come (a head: an earlier read)

    def __post_init__(self) -> None:
        if self.end < 0:
            self.end = len(self.done)

    def parts(self) -> list[Chunk]:
        """The head's line, then these: in the order they were written."""
        return [self] if self.head is None else [self.head, self]

    @property
    def own(self) -> bytes:
        """Its own whole lines as written, without the head's."""
        return self.done if (self.start, self.end) == (0, len(self.done)) else (
            self.done[self.start:self.end])

    @property
    def text(self) -> bytes:
        """The whole lines as written, the head's first."""
        return self.own if self.head is None else self.head.text + self.own

    def first_is(self, key: bytes) -> bool:
        return self.rough.startswith(key + b"\n", self.start)

    def line(self, key: bytes, *, last: bool = False) -> bytes:
        """The first (or last) line of shape `key`, as written."""
        framed = b"\n" + key + b"\n"
        if last:
            at = self.rough.rfind(framed, max(self.start - 1, 0), self.end) + 1
            if at == 0:
                at = self.start if self.first_is(key) else -1
        elif self.first_is(key):
            at = self.start
        else:
            at = self.rough.find(framed, max(self.start - 1, 0), self.end) + 1
            at = at if at > 0 else -1
        return self.done[at:at + len(key)] if at >= 0 else b""


def chunk_of(done: bytes, *, redrawn_first: bool = False, start: int = 0, end: int = -1,
             head: Chunk | None = None, recent: Memory | None = None,
             came: float | None = None) -> Chunk:
    """The lines of `done` from `start` (just after a newline) to `end` (just after one);
    a crowded chunk's shapes narrowed with what `recent` remembers of its stream."""
    end = len(done) if end < 0 else end
    if b"\r" in done:  # (a byte's search is memchr: far cheaper than a replace)
        done = done[start:end].replace(b"\r\n", b"\n")  # CRLF: one line, not a redraw
        start, end = 0, len(done)
    rough = done.translate(_HASH)
    counts = _shapes(rough, start, end)
    crowded = 0
    if len(counts) > MAX_SHAPES:
        crowded = len(counts)
        counts = _narrow(done, rough, start, end, counts, recent or Memory())
    elif recent is not None:
        recent.last = counts
    return Chunk(done, rough, counts, redrawn_first, crowded, start, end, head, came)


@dataclass
class Memory:
    """What a stream's crowded chunks are narrowed with: the shapes of its chunk before, and
    shapes kept from earlier ones (in two chunks, or holding a needle)."""

    last: Counter[bytes] = field(default_factory=Counter)
    known: dict[bytes, None] = field(default_factory=dict)

    def keep(self, key: bytes) -> None:
        if len(self.known) >= MAX_KNOWN:
            self.known.clear()
        self.known[key] = None


def _narrow(done: bytes, rough: bytes, start: int, end: int, counts: Counter[bytes],
            recent: Memory) -> Counter[bytes]:
    """A crowded chunk's shapes worth reading: lines with a needle, shapes known before,
    then shapes shared with the stream's chunk before (set operations in C)."""
    hits: dict[bytes, int] = {}  # a needle's line's shape -> where it was first found
    low = done.lower()
    for needle in NEEDLES:
        at = low.find(needle, start, end)
        for p in (at, low.rfind(needle, at + 1, end)) if at >= 0 else ():
            if p >= 0:
                key = rough[rough.rfind(b"\n", start, p) + 1:rough.find(b"\n", p)]
                if key in counts:
                    hits[key] = min(p, hits.get(key, p))
    keep = {key: counts[key] for key in sorted(hits, key=hits.__getitem__)}
    for key in keep:
        recent.keep(key)
    for key in [k for k in recent.known if k in counts][:MAX_SHAPES - len(keep)]:
        keep[key] = counts[key]
    for key in islice(counts.keys() & recent.last.keys(), MAX_SHAPES):
        if len(keep) >= MAX_SHAPES:
            break
        if key not in keep:
            keep[key] = counts[key]
            recent.keep(key)
    recent.last = counts
    return Counter(keep)  # the needles' lines in the order they came, then the others


def _shapes(rough: bytes, start: int, end: int) -> Counter[bytes]:
    """Each shape's lines. A chunk of one shape (a flood of `step #### loss #.####`) is known
    with no line cut out: it is its first line repeated (one compare, in C)."""
    first = rough[start:rough.find(b"\n", start) + 1]
    lines, rest = divmod(end - start, len(first))
    if not rest and rough.startswith(first * lines, start):
        return Counter({first[:-1]: lines})
    keys = (rough if (start, end) == (0, len(rough)) else rough[start:end]).split(b"\n")
    keys.pop()  # after the last newline: nothing
    return Counter(keys)


@dataclass
class Lines:
    """A stream's bytes as they come, cut at its last newline: whole lines as a Chunk, the
    unended rest kept for the next read; a progress bar's redraws (`\\r`) in the rest given
    out as they come (`drawn`). Each chunk carries when its first line began to come: a line
    whose newline came in a later read (an unbuffered print writes the two apart) is of the
    moment its first bytes came."""

    partial: dict[str, bytes] = field(default_factory=dict)
    began: dict[str, float] = field(default_factory=dict)  # when each partial began to come
    redrawn: dict[str, bool] = field(default_factory=dict)
    memory: dict[str, Memory] = field(default_factory=dict)  # for crowded chunks

    def feed(self, stream: str, data: bytes,
             came: float | None = None) -> tuple[Chunk | None, list[bytes]]:
        """`came`: when the read came (None where no one asks)."""
        partial = self.partial.get(stream, b"")
        began = self.began.get(stream, came)
        recent = self.memory.get(stream) or self.memory.setdefault(stream, Memory())
        cut = data.rfind(b"\n") + 1
        chunk = None
        if cut == 0:  # no line ends here
            rest = partial + data
        else:  # the read is shaped as it came (a line the last read began: its head)
            redrawn, self.redrawn[stream] = self.redrawn.get(stream, False), False
            if partial:
                first = data.find(b"\n") + 1
                head = chunk_of(partial + data[:first], redrawn_first=redrawn, came=began)
                chunk = head if first == cut else chunk_of(data, start=first, end=cut,
                                                           head=head, recent=recent, came=came)
            else:
                chunk = chunk_of(data, redrawn_first=redrawn, end=cut, recent=recent, came=came)
            rest, began = data[cut:], came
        drawn: list[bytes] = []
        if b"\r" in rest:  # redraws so far: read now, not when the bar ends
            cut = rest.rfind(b"\r")
            drawn = rest[:cut].split(b"\r")
            if len(drawn) > MAX_DRAWN:  # a bar redrawn at full speed: its first and last
                drawn = drawn[:MAX_DRAWN // 2] + drawn[-(MAX_DRAWN // 2):]
            rest, self.redrawn[stream] = rest[cut + 1:], True
        self._keep(stream, rest, began)
        return chunk, drawn

    def skip(self, stream: str, data: bytes, came: float | None = None) -> None:
        """A read not shaped (over the watch's budget): the next read starts at a whole line."""
        cut = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
        began = self.began.get(stream, came)
        if cut == 0:
            rest = self.partial.get(stream, b"") + data
        else:
            rest, began, self.redrawn[stream] = data[cut:], came, data[cut - 1:cut] == b"\r"
        self._keep(stream, rest, began)

    def _keep(self, stream: str, rest: bytes, began: float | None) -> None:
        self.partial[stream] = rest if len(rest) <= MAX_PARTIAL else b""
        if self.partial[stream] and began is not None:
            self.began[stream] = began
        else:
            self.began.pop(stream, None)
