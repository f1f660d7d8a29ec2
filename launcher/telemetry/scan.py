"""The workload's output, read in whole chunks rather than line by line in Python.

Pure. Each chunk of whole lines gets a rough copy with every digit a `#` (translate, in C), so
lines of one shape (`epoch #/#`, `Process #, rank #: # open FDs`) are one key; the keys are
counted at once (collections.Counter, in C). What reads the output (cycles.py, failures.py)
then looks at each distinct shape, a handful a chunk, and at its first and last line: the
cost of a chunk is its size in C and its shapes in Python, never its lines.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

_HASH = bytes.maketrans(b"0123456789", b"##########")
MAX_PARTIAL = 4096  # an unended line longer than this is dropped: no cycle or word in it


@dataclass
class Chunk:
    """Whole lines of one stream (`done`, each ending in a newline), by shape."""

    done: bytes
    rough: bytes  # `done` with every digit a `#`: the same length, line for line
    counts: Counter[bytes]  # shape -> its lines in the chunk, in order of first appearance
    redrawn_first: bool = False  # the first line is the end of a progress bar's redraws

    def line(self, key: bytes, *, last: bool = False) -> bytes:
        """The first (or last) line of shape `key`, as written."""
        if last:
            at = self.rough.rfind(b"\n" + key + b"\n") + 1
            if at == 0 and not self.rough.startswith(key + b"\n"):
                at = -1
        elif self.rough.startswith(key + b"\n"):
            at = 0
        else:
            at = self.rough.find(b"\n" + key + b"\n") + 1
        return self.done[at:at + len(key)] if at >= 0 else b""


def chunk_of(done: bytes, *, redrawn_first: bool = False) -> Chunk:
    if b"\r" in done:  # (a byte's search is memchr: far cheaper than a replace)
        done = done.replace(b"\r\n", b"\n")  # CRLF: one line, not a redraw
    rough = done.translate(_HASH)
    keys = rough.split(b"\n")
    keys.pop()  # after the last newline: nothing
    return Chunk(done, rough, Counter(keys), redrawn_first)


@dataclass
class Lines:
    """A stream's bytes as they come, cut at its last newline: whole lines as a Chunk, the
    unended rest kept for the next read; a progress bar's redraws (`\\r`) in the rest given
    out as they come (`drawn`)."""

    partial: dict[str, bytes] = field(default_factory=dict)
    redrawn: dict[str, bool] = field(default_factory=dict)

    def feed(self, stream: str, data: bytes) -> tuple[Chunk | None, list[bytes]]:
        buf = self.partial.get(stream, b"") + data
        cut = buf.rfind(b"\n") + 1
        done, rest = buf[:cut], buf[cut:]
        chunk = None
        if done:
            chunk = chunk_of(done, redrawn_first=self.redrawn.get(stream, False))
            self.redrawn[stream] = False
        drawn: list[bytes] = []
        if b"\r" in rest:  # redraws so far: read now, not when the bar ends
            cut = rest.rfind(b"\r")
            drawn = rest[:cut].split(b"\r")
            rest, self.redrawn[stream] = rest[cut + 1:], True
        self.partial[stream] = rest if len(rest) <= MAX_PARTIAL else b""
        return chunk, drawn
