"""Growth across cycles: the per-cycle series of a run, its trend, and where each limit falls.

Pure: telemetry rows in (the sampler's samples, and a row at each cycle boundary), cycles and
trends out. Each cycle has a floor (the least any reading of it saw: what the cycle kept) and a
peak (the most: what it needed). The trend is fitted on the floors, so a garbage collector's
sawtooth or threads started and joined within a cycle raise none: only what cycles keep
grows. It is the mean step from one cycle's floor to the next after the warm-up (a random walk
with drift: growth that varies from cycle to cycle is the usual leak), gated on its standard
error; the limit is reached in the first cycle whose projected floor plus the largest excess
of a peak over its floor passes it.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Dict

from launcher.telemetry.cycles import WINDOW, active_unit
from launcher.telemetry.series import SERIES, Series
from launcher.threadpools import UNNAMED

Row = Dict[str, Any]


CHILDREN = 1 / 3  # of the threads' growth, the processes' that makes it theirs (zombies;
# a pool's workers, 2 processes beside its 3 handler threads: each a task of pids.max)
KERNEL_PEAK = "memory_peak_bytes"  # a boundary row's: the cgroup's peak charge since the last
MIN_POINTS = 3  # floors in a fit: two steps
NOISY_STEPS = 5  # steps a fit of bytes needs when they differ
COUNT_STEPS = 4  # and a count's (its spread has a floor: COUNT_SPREAD)
COUNT_SPREAD = 0.5  # the least spread of a count's steps (threads, maps, files)
T_MIN = 3.0  # mean step / its standard error
SEEN_SHARE = 0.3  # of a noisy projection's cycles, seen before it is said
SURE_CYCLES = 2.5  # the projected cycle's spread (one standard error) at most, or
SURE_SHARE = 0.1  # this share of the cycles ahead (a limit 200 cycles off: +-20)
SLOWING = 0.85  # the newer half's mean step under this share of the older half's (and
# beyond their noise): slowing
SLOWING_STEPS = 6  # steps a fit needs before it can say so


@dataclass
class Cycle:
    n: int  # as the workload numbers it (or counted, where its numbers do not rise)
    t0: float
    t1: float | None  # None: the run was still in it (or ended in it)
    floor: dict[str, float]
    peak: dict[str, float]
    census: dict[str, dict[str, int]] | None  # at its start: pool -> {thread name: count}
    limits: dict[str, float]
    loaded: dict[str, dict[str, str]]  # frameworks mapped: {label: {"unnamed", "fix"}}
    kernel_peak: int | None = None  # the memory cgroup's peak charge in it, where kept
    who: dict[str, str] = field(default_factory=dict)  # series -> the process holding most
    low: dict[str, float] = field(default_factory=dict)  # a time window's own least readings

    @property
    def seconds(self) -> float | None:
        return None if self.t1 is None else self.t1 - self.t0


@dataclass(frozen=True)
class Trend:
    series: str
    unit: str
    per_cycle: float
    per_minute: float | None
    first: int  # the cycles fitted
    last: int
    points: int
    grows: bool  # passed the gate: the floors rise, beyond their noise
    confident: bool  # grows, and the projection is sure within SURE_CYCLES and the horizon
    limit: float | None
    reached: int | None  # the cycle in which the limit is reached (projected)
    uncertainty: float | None  # +- cycles
    in_s: float | None  # seconds until that cycle starts
    pool: str | None  # the growing pool (threads), from the census
    pool_names: tuple[str, ...] = ()
    pool_hint: str | None = None  # whose unnamed threads most likely are (frameworks loaded)
    fix: str | None = None  # the loaded framework's words for stopping it
    of: str = "floor"  # what grows: what each cycle keeps (floor), or needs (peak)
    slowing: bool = False  # each step slower than the last: projected from the newer half
    reached_s: float | None = None  # seconds into the run where the limit's cycle starts
    process: str | None = None  # the process whose count grew, where the tree has several
    what: str | None = None  # what grew, by the census: `run.log open 37 times in ...`

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "pool_names": list(self.pool_names)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Trend:
        """A trend from to_json's (summary.json's trends, the lines the watch said)."""
        return cls(**{**data, "pool_names": tuple(data.get("pool_names") or ())})


def numbered(marks: list[Row], after: int = 0) -> list[int]:
    """The workload's own numbers when they rise (past `after`, the last cycle before these),
    else after + 1, after + 2..."""
    ns = [int(m["cycle"]["n"]) for m in marks]
    rising = all(b > a for a, b in zip(ns, ns[1:]))
    if rising and (not after or not ns or ns[0] > after):
        return ns
    return [after + i for i in range(1, len(ns) + 1)]


def cycles_of(rows: list[Row], unit: str | None = None,
              after: int = 0) -> tuple[str | None, list[Cycle]]:
    """The run's cycles in `unit` (default: the outermost loop its output marked); `after`:
    the number of the cycle before these rows' first (CycleBook's)."""
    marks_all = [r for r in rows if r.get("cycle")]
    unit = unit or active_unit([m["cycle"]["unit"] for m in marks_all])
    marks = [m for m in marks_all if m["cycle"]["unit"] == unit]
    times = [r["t"] for r in rows]  # in order: the sampler writes them so
    out: list[Cycle] = []
    for i, (mark, n) in enumerate(zip(marks, numbered(marks, after))):
        t0 = mark["t"]
        end = marks[i + 1] if i + 1 < len(marks) else None
        t1 = end["t"] if end is not None else None
        lo = bisect.bisect_left(times, t0)
        # the next boundary's reading is the next cycle's: the workload goes on while it is
        # read, and what it starts then is that cycle's
        hi = len(rows) if t1 is None else bisect.bisect_left(times, t1)
        span = rows[lo:hi]
        floor: dict[str, float] = {}
        peak: dict[str, float] = {}
        limits: dict[str, float] = {}
        for key, s in SERIES.items():
            values = [r[key] for r in span if isinstance(r.get(key), (int, float))]
            if values:
                floor[key], peak[key] = min(values), max(values)
            got = [r[s.limit_key] for r in span if r.get(s.limit_key)]
            if got:
                limits[key] = got[-1]
        # the kernel's own peak charge between the two boundaries (page cache included, so
        # shown beside the working set, not mixed into it)
        kernel = end.get(KERNEL_PEAK) if end is not None else None
        who = next((r["who"] for r in reversed(span) if r.get("who")), {})
        out.append(Cycle(n, t0, t1, floor, peak, mark.get("census"), limits,
                         mark.get("loaded") or {}, kernel if isinstance(kernel, int) else None,
                         who))
    return unit, out


class CycleBook:
    """A running run's cycles, kept as its rows come: the closed ones are made once, so a fit
    at each boundary reads the cycles and the rows of the one still open, not every row."""

    def __init__(self) -> None:
        self.unit: str | None = None
        self.units: Counter[str] = Counter()  # boundaries seen, per unit
        self.total: int | None = None
        self.closed: list[Cycle] = []
        self.open: Cycle | None = None
        self.start = 0  # the index, in the rows, of the open cycle's boundary row
        self.scanned = 0

    def update(self, rows: list[Row]) -> list[Cycle]:
        """The cycles so far (the last still open), from `rows` (every row of the run, or all
        from `start` on: the caller may drop the rows before it, then calls `dropped`)."""
        for r in rows[self.scanned:]:
            if r.get("cycle"):
                self.units[r["cycle"]["unit"]] += 1
        self.scanned = len(rows)
        unit = active_unit(self.units)
        if unit != self.unit:  # an outer loop showed up: its cycles, from the first row
            self.unit, self.closed, self.open, self.start = unit, [], None, 0
        if unit is None:
            return []
        after = self.closed[-1].n if self.closed else 0
        _, cycles = cycles_of(rows[self.start:], unit, after)
        if not cycles:
            return []
        self.closed += cycles[:-1]
        self.open = cycles[-1]
        self.start = next(i for i in range(len(rows) - 1, -1, -1)
                          if rows[i]["t"] == self.open.t0 and rows[i].get("cycle")
                          and rows[i]["cycle"]["unit"] == unit)
        total = next((r["cycle"].get("total") for r in reversed(rows[self.start:])
                      if r.get("cycle") and r["cycle"]["unit"] == unit), None)
        self.total = total or self.total
        return [*self.closed, self.open]

    def dropped(self, count: int) -> None:
        """The caller dropped the first `count` rows (all before `start`)."""
        self.start -= count
        self.scanned -= count


def fit(key: str, unit: str, cycles: list[Cycle], *, now: float | None = None,
        total: int | None = None, limits: dict[str, float | None] | None = None
        ) -> Trend | None:
    """The trend of one series over `cycles` (the last may be running), or None when it has
    too few cycles to say. `limits` (series -> figure, None: no limit) replaces the limits
    recorded (a what-if)."""
    s = SERIES[key]
    cyc = [c for c in cycles if key in c.floor]
    if len(cyc) > MIN_POINTS:  # the first cycle builds pools and caches once: warm-up
        cyc = cyc[1:]
    if len(cyc) < MIN_POINTS:
        return None
    trend, mean, sd, se, exact = gate(s, [(c.n, c.floor[key]) for c in cyc])
    of = "floor"
    closed_peaks = [(c.n, c.peak[key]) for c in cyc if c.t1 is not None]
    if not trend and mean <= s.min_step and len(closed_peaks) >= MIN_POINTS:
        # what each cycle keeps is flat, but what it needs grows (a batch, a cache or a pool
        # made larger each cycle and freed at its end): that passes a limit all the same
        # (floors that rise but are not yet sure wait: they are the leak)
        peak_gate = gate(s, closed_peaks)
        if peak_gate[0]:
            (trend, mean, sd, se, exact), of = peak_gate, "peak"
    slowing = False
    if trend:
        (mean, sd, se), slowing = recent_rate(s, [(c.n, c.floor[key] if of == "floor" else
                                                   c.peak[key]) for c in cyc], mean, sd, se)
    durations = [(b.t0 - a.t0) / max(b.n - a.n, 1)
                 for a, b in zip(cycles, cycles[1:])]
    per_cycle_s = statistics.median(durations) if durations else None
    limit = limits.get(key) if limits is not None else cyc[-1].limits.get(key)
    if key == "rss_bytes" and any("memory_bytes" in c.floor for c in cyc):
        limit = None  # the cgroup's working set meets the limit; a tree's RSS counts shared
        # pages once per process, the supervisor's too
    reached = uncertainty = in_s = reached_s = None
    if trend and limit:
        closed = [c for c in cyc if c.t1 is not None] or cyc
        if of == "floor":
            excess = max(c.peak[key] - c.floor[key] for c in closed)
            last = cyc[-1]
            need = limit - excess - last.floor[key]  # the growth the limit has room for
        else:  # the last whole cycle's peak, and its growth
            last = closed[-1]
            need = limit - last.peak[key]
        # the first cycle whose peak would pass the limit: reaching it is allowed, passing not
        ahead = math.floor(need / mean) + 1 if need >= 0 else 0
        reached = last.n + ahead
        # one standard error: of the mean step, carried over the cycles ahead, and the
        # steps still to come, which vary as the past ones did (a random walk's spread)
        uncertainty = math.hypot(ahead * se, math.sqrt(ahead) * sd) / mean if mean else None
        if per_cycle_s is not None:
            into = (now - last.t0) if now is not None else 0.0
            in_s = max(0.0, (reached - last.n) * per_cycle_s - into)
            reached_s = last.t0 + (reached - last.n) * per_cycle_s
    horizon = (total if total else max(20, 10 * len(cycles)))
    # a noisy series' early steps are few: an early run of similar steps looks sure and is
    # not, so a projection waits until SEEN_SHARE of the cycles to its limit have been seen
    seen = exact or (reached is not None and cyc[-1].n >= SEEN_SHARE * reached)
    sure = (trend and reached is not None and uncertainty is not None and seen
            and uncertainty <= max(SURE_CYCLES, SURE_SHARE * (reached - cyc[-1].n))
            and reached <= max(horizon, cyc[-1].n))
    pool, names = growing_pool(cyc) if key == "threads" and trend else (None, ())
    # the run's framework first, where it is loaded (launcher/telemetry/census.py)
    fw, said = next(iter(cyc[-1].loaded.items()), (None, {}))
    hint = (f"with {fw} loaded, most likely {said['unnamed']}"
            if pool == UNNAMED and said.get("unnamed") else None)
    fix = said.get("fix") or None
    return Trend(key, unit, mean, mean / per_cycle_s * 60 if per_cycle_s else None,
                 cyc[0].n, cyc[-1].n, len(cyc), trend, bool(sure), limit, reached,
                 uncertainty, in_s, pool, names, hint, fix, of, slowing, reached_s,
                 cyc[-1].who.get(key), _what(cycles, key))


def _what(cycles: list[Cycle], key: str) -> str | None:
    """The census's words for what grew in `key`, the newest a cycle kept."""
    return next((c.who[f"{key}_what"] for c in reversed(cycles) if c.who.get(f"{key}_what")),
                None)


def _stdev(xs: list[float]) -> float:
    """The sample standard deviation in floats (statistics.stdev's exact arithmetic costs
    ~50 us a call, and a fit at each boundary makes hundreds)."""
    n = len(xs)
    mean = math.fsum(xs) / n
    return math.sqrt(max(0.0, math.fsum((x - mean) ** 2 for x in xs) / (n - 1)))


def gate(s: Series, points: list[tuple[int, float]]) -> tuple[bool, float, float, float, bool]:
    """(a trend?, the mean step per number, the steps' spread, its standard error, exact?)
    of one series' points (cycle number, value)."""
    steps = [(b - a) / max(m - n, 1) for (n, a), (m, b) in zip(points, points[1:])]
    mean = statistics.fmean(steps)
    sd = _stdev(steps) if len(steps) > 1 else 0.0
    exact = sd == 0.0 and not s.in_bytes  # a count that grew by the same each cycle
    # a count's steps are whole numbers: two equal ones may still be a noisy leak's, so their
    # spread is taken as at least half a step of one (a leak of 3 +- 1.5 threads a cycle can
    # step 2, 2; the k-fold's exact +7 stays sure, a +2 far from its limit waits)
    sd = max(sd, COUNT_SPREAD) if not s.in_bytes else sd
    se = sd / math.sqrt(len(steps))
    rising = sum(d > 0 for d in steps) >= 2 * len(steps) / 3
    # a workload may print every 100th step: growth is per number printed, and the noise
    # floor is held against the growth between two lines
    gaps = sorted(m - n for (n, _), (m, _) in zip(points, points[1:]))
    # a count's spread has its floor (COUNT_SPREAD), so its t-test holds from fewer steps
    enough = len(steps) >= (NOISY_STEPS if s.in_bytes else COUNT_STEPS)
    trend = mean * gaps[len(gaps) // 2] > s.min_step and rising and (exact or (
        enough and mean >= T_MIN * se))
    return trend, mean, sd, se, exact


def recent_rate(s: Series, points: list[tuple[int, float]], mean: float, sd: float,
                se: float) -> tuple[tuple[float, float, float], bool]:
    """Growth that slows as it grows (each step smaller than the last: a pool filling up, a
    cache nearing its size) is projected from its newer half: (mean, spread, standard error),
    and whether it slows. Steady growth keeps the fit over every step."""
    steps = [(b - a) / max(m - n, 1) for (n, a), (m, b) in zip(points, points[1:])]
    if len(steps) < SLOWING_STEPS:
        return (mean, sd, se), False
    half = len(steps) // 2
    older, newer = steps[:half], steps[-half:]
    old, new = statistics.fmean(older), statistics.fmean(newer)
    spread = [_stdev(h) for h in (older, newer)]
    if not s.in_bytes:
        spread = [max(x, COUNT_SPREAD) for x in spread]
    ose, nse = (x / math.sqrt(half) for x in spread)
    # slower beyond the steps' noise (two standard errors of the difference)
    if not (0 < new < SLOWING * old and old - new > 2 * math.hypot(ose, nse)):
        return (mean, sd, se), False
    return (new, spread[1], nse), True


def growing_pool(cycles: list[Cycle]) -> tuple[str | None, tuple[str, ...]]:
    """The pool whose threads grew most between the first and last census of `cycles`, and
    the names that grew in it."""
    counted = [c.census for c in cycles if c.census]
    if len(counted) < 2:
        return None, ()
    first, last = counted[0], counted[-1]
    growth = {pool: sum(names.values()) - sum(first.get(pool, {}).values())
              for pool, names in last.items()}
    pool, most = max(growth.items(), key=lambda kv: kv[1], default=(None, 0))
    if pool is None or most <= 0:
        return None, ()
    grew = {n: k - first.get(p, {}).get(n, 0) for p, names in last.items()
            for n, k in names.items()}
    names = tuple(sorted((n for n, d in grew.items() if d > 0), key=lambda n: -grew[n]))
    return pool, names[:3]


def cycle_trends(rows: list[Row], *, now: float | None = None,
           limits: dict[str, float | None] | None = None,
           ended: bool = False) -> tuple[str | None, list[Cycle], list[Trend]]:
    """Every series' trend for a run's rows; `limits` (series -> figure) replaces the recorded
    limits (a what-if). `ended`: the run is over, and the cycle it ended in (cut short, its
    floor held down by the limit it met) is left out of the fits."""
    unit, cycles = cycles_of(rows)
    if unit is None:  # no line marked a cycle (timeline.trends: time does)
        return None, [], []
    total = next((r["cycle"].get("total") for r in reversed(rows)
                  if r.get("cycle") and r["cycle"]["unit"] == unit), None)
    return unit, cycles, fit_all(unit, cycles, now=now, total=total, limits=limits,
                                 ended=ended)


def fit_all(unit: str, cycles: list[Cycle], *, now: float | None = None,
            total: int | None = None, limits: dict[str, float | None] | None = None,
            ended: bool = False) -> list[Trend]:
    """Every series' trend over `cycles` (trends' work once the cycles are known)."""
    fitted = cycles[:-1] if ended and len(cycles) > MIN_POINTS and cycles[-1].t1 is None \
        else cycles
    out = []
    for key in SERIES:
        t = fit(key, unit, fitted, now=now, total=total, limits=limits)
        if t is not None:
            out.append(t)
    if unit != WINDOW:  # (time windows join their own: timeline.py)
        out = stepwise(out, unit, fitted, now=now, total=total, limits=limits)
    return as_processes(out)


JOINED = (4, 8)  # cycles taken as one, for a count that steps in some cycles only
MIN_JOINED = 6  # joined cycles a fit needs


def stepwise(found: list[Trend], unit: str, cycles: list[Cycle], **kw: Any) -> list[Trend]:
    """A count that grows in steps with flat cycles between (a pool made at each fit's first
    generation, the generations marking the cycles: +5, 0, 0, 0, 0, 0) never rises in two
    thirds of its steps; taken JOINED cycles at a time it does. Memory that grows in lumps
    (a traced module kept each iteration: +20-50 MB in some, flat or freed in the others)
    does the same. Used where that fit is sure and the cycles' own is not."""
    for stride in JOINED:
        if len(cycles) // stride < MIN_JOINED:
            break
        coarse = [joined(cycles[i:i + stride], i // stride + 1)
                  for i in range(0, len(cycles), stride)]
        wider = {}
        for t in found:
            if not t.confident:
                w = fit(t.series, unit, coarse, **kw)
                if w is not None and w.confident:
                    wider[t.series] = narrowed(w, stride, cycles[0].n - 1)
        found = [wider.get(t.series, t) for t in found]
    return found


def joined(cycles: list[Cycle], n: int) -> Cycle:
    """Cycles (or time windows) taken as one: the least of their floors (a window's floor is
    already the least from it on), the most of their peaks, the least of their readings."""
    first, last = cycles[0], cycles[-1]
    floor = {k: min(c.floor[k] for c in cycles if k in c.floor) for k in first.floor}
    peak = {k: max(c.peak[k] for c in cycles if k in c.peak) for k in first.peak}
    low = {k: min(c.low[k] for c in cycles if k in c.low) for k in first.low}
    return replace(first, n=n, t1=last.t1, floor=floor, peak=peak, limits=dict(last.limits),
                   who=last.who, loaded=last.loaded, low=low)


def narrowed(t: Trend, stride: int, offset: int) -> Trend:
    """A trend over joined cycles, told in the cycles' own numbers (from offset + 1)."""
    def back(n: int) -> int:
        return (n - 1) * stride + 1 + offset

    return replace(t, per_cycle=t.per_cycle / stride, first=back(t.first),
                   last=back(t.last) + stride - 1,
                   reached=None if t.reached is None else back(t.reached),
                   uncertainty=None if t.uncertainty is None else t.uncertainty * stride)


def as_processes(found: list[Trend]) -> list[Trend]:
    """Threads that grow as processes do (children never waited for, pools never closed) are
    processes: the tasks' trend (what pids.max counts) named as theirs, with the children's
    command and state. The processes' own count meets no limit of its own here."""
    tasks = next((t for t in found if t.series == "threads"), None)
    procs = next((t for t in found if t.series == "processes"), None)
    out = [t for t in found if t.series != "processes"]
    if tasks is None or procs is None or not (tasks.grows and procs.grows) or (
            procs.per_cycle < CHILDREN * tasks.per_cycle):
        return out
    return [replace(t, series="processes", what=procs.what, pool=None, pool_names=(),
                    pool_hint=None, fix=None) if t is tasks else t
            for t in out]


def first_death(found: list[Trend]) -> Trend | None:
    """Of the confident trends, the one whose limit comes first."""
    order = list(SERIES)  # the kernel's charge before the RSS, when both meet one limit
    sure = [t for t in found if t.confident and t.reached is not None]
    return min(sure, key=lambda t: (t.reached, order.index(t.series)), default=None)


KEPT_CYCLES = 1000  # in summary.json: a long run's cycles thinned to about this many


def to_json(unit: str | None, cycles: list[Cycle], found: list[Trend]) -> dict[str, Any]:
    """The growth record; a run of more than KEPT_CYCLES cycles keeps every k-th and its last
    hundred (`cycles_kept` says so; telemetry.jsonl keeps them all)."""
    every, count = max(1, math.ceil(len(cycles) / KEPT_CYCLES)), len(cycles)
    if every > 1:
        cycles = [c for i, c in enumerate(cycles) if i % every == 0 or i >= len(cycles) - 100]
    return {"unit": unit, "cycles_count": count,
            "cycles_kept": "all" if every == 1 else f"every {every}th",
            "cycles": [{"n": c.n, "t0": c.t0, "t1": c.t1, "floor": c.floor, "peak": c.peak,
                        "kernel_peak": c.kernel_peak, "census": c.census, "limits": c.limits}
                       for c in cycles],
            "trends": [t.to_json() for t in found]}


def died_in(cycles: list[Cycle]) -> int | None:
    """The cycle the run ended in: its last."""
    return cycles[-1].n if cycles else None
