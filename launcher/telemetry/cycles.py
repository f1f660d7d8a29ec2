"""A run's cycles (folds, epochs, validation cycles, steps), read from the workload's own output.

Pure: lines in, boundaries out. The default patterns cover the common loops (docs/growth.md
lists them); a user's own pattern (`--cycle`, the profile's `growth.cycle`) replaces them. Where
no line matches, `growth.window` seconds stand in for a cycle (the watcher's job, not this
module's).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# "fold 3", "Fold 3/5", "fold: 3 of 5", "Epoch 2/10" (Keras), "cycle 12", "step 400"
_COUNT = r"\s*[#:=]?\s*(?P<n>\d+)(?:\s*(?:/|of)\s*(?P<total>\d+))?"
# the outer loop first: a fold holds epochs, an epoch holds steps
UNITS = ("fold", "cycle", "epoch", "step")
DEFAULT_PATTERNS = {unit: re.compile(rf"\b{unit}{_COUNT}", re.IGNORECASE) for unit in UNITS}
CUSTOM = "cycle"  # the unit a user's own pattern counts in
WINDOW = "window"  # the unit of fixed time windows, where nothing matched


@dataclass(frozen=True)
class Boundary:
    """A cycle began: its unit, its number as printed (or counted), the total when printed."""

    unit: str
    n: int
    total: int | None
    line: str

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


class CycleMarks:
    """Feed it the workload's output as it comes; it returns the boundaries the lines mark.
    A boundary is a higher number for a unit, or 1 again (a line repeating "fold 2", or
    naming an earlier fold, marks nothing)."""

    def __init__(self, pattern: re.Pattern[str] | None = None) -> None:
        self.patterns = {CUSTOM: pattern} if pattern is not None else dict(DEFAULT_PATTERNS)
        self.partial: dict[str, str] = {}
        self.last: dict[str, int] = {}
        self.counted = 0  # a pattern without a number: the lines it matched
        self.unnumbered: str | None = None  # a line whose group was no number (said once)

    def feed(self, stream: str, data: bytes) -> list[Boundary]:
        text = self.partial.get(stream, "") + data.decode(errors="replace")
        *lines, self.partial[stream] = re.split(r"[\r\n]", text)
        if len(self.partial[stream]) > 4096:  # a line that never ends: no cycle in it
            self.partial[stream] = ""
        return [b for line in lines if (b := self.line(line)) is not None]

    def line(self, line: str) -> Boundary | None:
        for unit, pattern in self.patterns.items():
            m = pattern.search(line)
            if m is None:
                continue
            n, total = self._number(m)
            if n is None:
                self.unnumbered = self.unnumbered or line.strip()[:120]
            last = self.last.get(unit)
            # a new cycle counts up, or starts again at 1 inside an outer loop (epochs within
            # each fold); a line that names an earlier one ("checkpoint written after cycle
            # 3") marks nothing
            if n is None or (last is not None and n <= last and not (
                    n == 1 and last > 1 and self._inner(unit))):
                continue
            self.last[unit] = n
            return Boundary(unit, n, total, line.strip())
        return None

    def _inner(self, unit: str) -> bool:
        """Whether a loop outside `unit` has marked a cycle (folds around epochs)."""
        return unit in UNITS and any(u in self.last for u in UNITS[:UNITS.index(unit)])

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


def active_unit(units: list[str]) -> str | None:
    """The unit a run's cycles are counted in: the outermost loop seen (a user's pattern's own
    unit; windows only where nothing else was)."""
    for unit in UNITS:
        if unit in units:
            return unit
    return WINDOW if WINDOW in units else None
