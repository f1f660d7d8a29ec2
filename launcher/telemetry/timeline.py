"""Growth where no line marks a cycle: time does, at a resolution that suits the run.

Pure: telemetry rows in, time windows (as cycles) and trends out. The run's samples go into
at most MAX_WINDOWS windows of equal length: one sample interval at first, twice as long each
time they would be more (two neighbours merged: the least and the most of both). So a run of a
minute is fitted on windows of a second or two, and one of ten hours on windows of ten or
twenty minutes, from the same few dozen points and under the same gate as cycles (floors,
spread, share seen). A window's floor is the least reading from it to now (what the run kept
since, not what a collector freed later); the first quarter of the run is its warm-up (imports,
pools, the first compile), never fitted. The fit is tried on the last three quarters, half and
quarter of the run, so growth that starts late is found, where it has lasted MIN_SECONDS and
climbed past the least reading of every window before its newest quarter (a sawtooth's ramp
climbs no higher than the last one did).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import zip_longest
from typing import Any, Dict

from launcher.telemetry import growth
from launcher.telemetry.cycles import WINDOW
from launcher.telemetry.growth import Cycle, Trend, fit_all, joined, narrowed
from launcher.telemetry.series import SERIES

Row = Dict[str, Any]
MAX_WINDOWS = 48  # windows kept; past this, neighbours merge and the length doubles
SHARES = (0.75, 0.5, 0.25)  # of the run's windows, fitted: the newest ones
MIN_WINDOWS = 8  # in a fit
NEW_GROUND = 0.1  # of the earlier windows' range, the newest must pass their highest by
MIN_SECONDS = 10.0  # of growth fitted before it is said (an import's rise is shorter)
STRIDES = (2, 4)  # windows taken as one, for a count that grows less than one a window


@dataclass
class Window:
    floor: dict[str, float] = field(default_factory=dict)
    peak: dict[str, float] = field(default_factory=dict)
    limits: dict[str, float] = field(default_factory=dict)
    census: dict[str, dict[str, int]] | None = None
    loaded: dict[str, dict[str, str]] = field(default_factory=dict)
    who: dict[str, str] = field(default_factory=dict)

    def add(self, row: Row) -> None:
        for key, s in SERIES.items():
            v = row.get(key)
            if isinstance(v, (int, float)):
                self.floor[key] = min(self.floor.get(key, v), v)
                self.peak[key] = max(self.peak.get(key, v), v)
            limit = row.get(s.limit_key)
            if limit:
                self.limits[key] = limit
        if self.census is None and row.get("census"):
            self.census = row["census"]
        if row.get("loaded"):
            self.loaded = row["loaded"]
        if row.get("who"):
            self.who = row["who"]

    def merge(self, later: Window) -> Window:
        keys = set(self.floor) | set(later.floor)
        return Window({k: min(self.floor.get(k, later.floor.get(k)),  # type: ignore[type-var]
                              later.floor.get(k, self.floor.get(k))) for k in keys},
                      {k: max(self.peak.get(k, later.peak.get(k)),  # type: ignore[type-var]
                              later.peak.get(k, self.peak.get(k))) for k in keys},
                      {**self.limits, **later.limits}, self.census or later.census,
                      later.loaded or self.loaded, later.who or self.who)


class Timeline:
    """A run's samples as time windows: `add` each row; `cycles` are the windows so far."""

    def __init__(self, width: float = 1.0) -> None:
        self.width = width
        self.origin: float | None = None
        self.windows: list[Window] = []

    def add(self, row: Row) -> bool:
        """Whether a window closed with this row (a fit is due)."""
        t = row.get("t")
        if not isinstance(t, (int, float)):
            return False
        if self.origin is None:
            self.origin = float(t)
        i = int((t - self.origin) // self.width)
        while i >= MAX_WINDOWS:
            pairs = zip_longest(self.windows[::2], self.windows[1::2])
            self.windows = [a.merge(b) if b is not None else a for a, b in pairs]
            self.width *= 2
            i = int((t - self.origin) // self.width)
        closed = i >= len(self.windows) and bool(self.windows)
        while len(self.windows) <= i:
            self.windows.append(Window())
        self.windows[i].add(row)
        return closed

    def cycles(self, *, ended: bool = False) -> list[Cycle]:
        """The windows as cycles numbered from 1, the last still open; each floor the least
        from its window to now. `ended`: the run is over, and the window it ended in (cut
        short, its readings those of a process dying or gone) is left out, floors too."""
        assert self.origin is not None or not self.windows
        out: list[Cycle] = []
        low: dict[str, float] = {}
        windows = self.windows[:-1] if ended and len(self.windows) > 1 else self.windows
        for i in range(len(windows) - 1, -1, -1):
            w = windows[i]
            for k, v in w.floor.items():
                low[k] = min(low.get(k, v), v)
            t0 = (self.origin or 0.0) + i * self.width
            t1 = None if i == len(windows) - 1 else t0 + self.width
            out.append(Cycle(i + 1, t0, t1, {k: low[k] for k in w.floor}, dict(w.peak),
                             w.census, dict(w.limits), w.loaded, None, dict(w.who),
                             dict(w.floor)))
        return out[::-1]


def fit_time(cycles: list[Cycle], *, now: float | None = None,
             limits: dict[str, float | None] | None = None) -> list[Trend]:
    """Every series' trend over time windows: for each, of the newest three quarters, half
    and quarter of the run, the first fit where it is confident, else the first where it
    grows, else the widest."""
    fits: list[list[Trend]] = []
    for share in SHARES:
        k = int(len(cycles) * share)
        if k < MIN_WINDOWS:
            break
        part = cycles[-k:]
        offset = part[0].n - 1
        if part[-1].t0 - part[0].t0 < MIN_SECONDS:
            break
        found = _strided(part, offset, now, limits)
        fits.append([t if not t.confident or _new_ground(t.series, cycles[:-1])
                     else replace(t, confident=False) for t in found])
    if not fits:
        return []
    out = []
    for widest in fits[0]:
        same = [t for f in fits for t in f if t.series == widest.series]
        out.append(next((t for t in same if t.confident), None)
                   or next((t for t in same if t.grows), widest))
    return out


def _strided(part: list[Cycle], offset: int, now: float | None,
             limits: dict[str, float | None] | None) -> list[Trend]:
    """fit_all over `part`'s windows, and for a slow count (a file every 2 s in windows of a
    second: steps of 0 and 1, never rising in two thirds of them) over every STRIDES' windows
    taken as one, where that fit is sure and the windows' is not."""
    found = [_shifted(t, offset) for t in fit_all(
        WINDOW, [replace(c, n=c.n - offset) for c in part], now=now, limits=limits)]
    for stride in STRIDES:
        if len(part) // stride < MIN_WINDOWS:
            break
        coarse = [joined(part[i:i + stride], i // stride + 1)
                  for i in range(0, len(part) - stride + 1, stride)]
        if len(part) % stride:  # the open window's own, last
            coarse.append(joined(part[-(len(part) % stride):], len(coarse) + 1))
        wider = {t.series: t for t in fit_all(WINDOW, coarse, now=now, limits=limits)}
        found = [narrowed(wider[t.series], stride, offset)
                 if not t.confident and t.series in wider and wider[t.series].confident
                 and not SERIES[t.series].in_bytes else t for t in found]
    return found


def _shifted(t: Trend, offset: int) -> Trend:
    return replace(t, first=t.first + offset, last=t.last + offset,
                   reached=None if t.reached is None else t.reached + offset)


def _new_ground(key: str, closed: list[Cycle]) -> bool:
    """The last closed window's least reading passed the least of every window before the
    newest quarter: a sawtooth's ramp climbs no higher than its last one did; a leak does."""
    lows = [c.low[key] for c in closed if key in c.low]
    earlier = lows[:-max(2, len(lows) // 4)]
    # past it by a tenth of its range: where a window's edges fall moves a ramp's top a little
    return not earlier or lows[-1] > max(earlier) + NEW_GROUND * (max(earlier) - min(earlier))


def trends(rows: list[Row], *, now: float | None = None,
           limits: dict[str, float | None] | None = None,
           ended: bool = False) -> tuple[str | None, list[Cycle], list[Trend]]:
    """growth.trends, and where no line marked a cycle, the time windows' (`ended`: the
    window the run ended in, cut short, is left out)."""
    unit, cycles, found = growth.cycle_trends(rows, now=now, limits=limits, ended=ended)
    if unit is not None:
        return unit, cycles, found
    line = Timeline()
    for r in rows:
        line.add(r)
    cycles = line.cycles(ended=ended)
    if not cycles:
        return None, [], []
    return WINDOW, cycles, fit_time(cycles, now=now, limits=limits)
