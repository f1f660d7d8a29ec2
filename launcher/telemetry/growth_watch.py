"""Growth watched while a run goes: the workload's output marks its cycles (any counter it
prints), the sampler records a row at each, and at each boundary the trends are fitted again;
where nothing marks a cycle, time windows that suit the run's length do (timeline.py). One
line is said as soon as a projection is sure and a limit falls within the run, again only when
it moves; on request the workload is stopped at the boundary of the last cycle that fits
(SIGTERM, then SIGKILL after the grace), so it can write its checkpoint. Also keeps the
workload's own words for a failed thread or allocation, for a failure too brief for any
sample."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from launcher.telemetry.cycles import WINDOW, Boundary, CycleMarks, active_unit
from launcher.telemetry.failures import FailureText
from launcher.telemetry.scan import Lines

if TYPE_CHECKING:  # the fit is imported at the first boundary, not at every run's start
    from launcher.telemetry.growth import Trend

STOP_GRACE_S = 10.0  # after the SIGTERM, SIGKILL
STOPPED_STATUS = 75  # EX_TEMPFAIL: stopped before a limit; run it again in a fresh process
SPARE_CYCLES = 1  # a stop comes this many cycles before the projected one
SPARE_WINDOWS = 2  # or time windows (a sample a second may miss a window's peak)
KEPT_ROWS = 5000  # rows kept in time windows after a line that marked one cycle only
STALE_CYCLES = 5.0  # an open cycle this many times the closed ones' median: the counter
STALE_MIN_S = 10.0  # (and at least this long) stopped marking: time windows take over
MIN_BOUNDARY_S = 0.05  # a unit's boundaries closer than this are one (a step counter prints
# many a second: the cycles recorded then hold several steps, and growth is per step still)


@dataclass(frozen=True)
class GrowthOptions:
    pattern: re.Pattern[str] | None = None  # the user's cycle pattern; None: the defaults
    window: float | None = None  # fixed seconds that stand in for a cycle where no line
    # marks one (growth.window); None: windows that suit the run's length (timeline.py)
    stop: bool = False  # stop the workload before the cycle that would reach a limit
    stop_by: str = "--stop-before-limit"  # what asked for it, for the sentences

    @classmethod
    def of(cls, profile: Any, *, cycle: str | None = None, stop: bool = False,
           cycle_by: str = "--cycle") -> GrowthOptions:
        """From the flags (`cycle`, `stop`), else the profile's growth keys. ValueError names
        the pattern that cannot mark cycles, and where it came from."""
        from launcher.telemetry.cycles import compile_pattern

        text = cycle if cycle is not None else profile.get("growth.cycle")
        pattern = None
        if text is not None:
            try:
                pattern = compile_pattern(str(text))
            except ValueError as exc:
                where = cycle_by if cycle is not None else (
                    f"{profile.where('growth.cycle')}: growth.cycle")
                raise ValueError(f"{where} {text!r}: {exc}") from None
        by = "--stop-before-limit" if stop else f"growth.stop ({profile.where('growth.stop')})"
        window = profile.get("growth.window")
        return cls(pattern=pattern, window=float(window) if window else None,
                   stop=stop or bool(profile.get("growth.stop")), stop_by=by)

    def to_json(self) -> dict[str, Any]:
        """For the supervisor, which watches (contract.WATCH)."""
        return {"cycle": self.pattern.pattern if self.pattern else None, "window": self.window,
                "stop": self.stop, "stop_by": self.stop_by}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> GrowthOptions:
        """to_json's, read back; a pattern that no longer compiles marks no cycle."""
        from launcher.telemetry.cycles import compile_pattern

        pattern = None
        if d.get("cycle"):
            try:
                pattern = compile_pattern(str(d["cycle"]))
            except ValueError:
                pattern = None
        return cls(pattern=pattern, window=float(d["window"]) if d.get("window") else None,
                   stop=bool(d.get("stop")), stop_by=str(d.get("stop_by") or "growth.stop"))


def _no_room(t: Trend, row: dict[str, Any], spare: int) -> bool:
    """Whether the reading at this boundary leaves no room for the cycle now starting and
    the spare one, each growing a whole step (a count's steps are whole: a fit of +2.91 on a
    busy host's late samples is +3 a cycle). The projection alone may come a cycle late when
    the samples do: the stop's SIGTERM then meets a workload already past its limit. A
    boundary's reading may or may not hold the starting cycle's growth (the sample races the
    workload): taken as not holding it, the stop comes a cycle early at worst, never late."""
    import math

    from launcher.telemetry.series import SERIES

    key = "threads" if t.series == "processes" else t.series  # the tasks pids.max counts
    value = row.get(key)
    if not isinstance(value, (int, float)) or not t.limit or t.per_cycle <= 0:
        return False
    step = t.per_cycle * 1.25 if SERIES[key].in_bytes else math.ceil(t.per_cycle)
    return value + (spare + 1) * step > t.limit


class Sampling(Protocol):
    """What the watch needs of a sampler (telemetry.sampler.Sampler; a test's double)."""

    rows: list[dict[str, Any]]  # the recent rows, which the watch trims
    interval: float

    def sample(self, extra: dict[str, Any] | None = None) -> Any: ...

    def pace(self, cycle_s: float) -> None: ...


@dataclass
class Said:
    t: float
    cycle: int
    line: str
    trend: dict[str, Any]


@dataclass
class GrowthWatch:
    options: GrowthOptions
    say: Callable[[str], None]
    sampler: Sampling | None = None  # once the workload started
    stop: Callable[[int], None] | None = None  # a signal for the supervisor
    marks: CycleMarks = field(init=False)
    failure: FailureText = field(default_factory=FailureText)
    lines: Lines = field(default_factory=Lines)  # the output, cut into chunks of whole lines
    said: list[Said] = field(default_factory=list)
    stopped: dict[str, Any] | None = None
    real_unit: bool = False
    broken: bool = False  # a bug in the watch stopped it; the run goes on
    next_window: float = 0.0
    marked_at: dict[str, float] = field(default_factory=dict)  # unit -> its last recorded
    book: Any = None  # growth.CycleBook, made at the first boundary (the fit's imports then)
    signalled: bool = False
    cycle_cpu: float = 0.0  # CPU seconds of the boundaries' work (their samples, the fit)
    told_unnumbered: bool = False
    shown: Trend | None = None
    units: Counter[str] = field(default_factory=Counter)  # boundaries recorded, per unit
    timeline: Any = None  # timeline.Timeline, while no line marks a cycle
    later: Callable[[float], None] | None = None  # the stop's SIGKILL after so many seconds,
    # by the caller's loop (the supervisor's)
    dropped: dict[str, float] = field(default_factory=dict)  # unit -> when it stopped
    # counting (a cycle many times longer than the others): time windows took over then

    def __post_init__(self) -> None:
        self.marks = CycleMarks(self.options.pattern)
        self.next_window = self.options.window or 0.0

    def attach(self, sampler: Sampling, stop: Callable[[int], None] | None,
               later: Callable[[float], None] | None = None) -> None:
        self.sampler, self.stop = sampler, stop
        self.later = later or self.later

    def output(self, stream: str, data: bytes, came: float | None = None) -> None:
        """The workload's output, as the supervisor's loop reads it; `came`: when it was
        read, where that was earlier (kept while the watch started)."""
        if self.broken:
            return
        came = time.monotonic() if came is None else came
        try:
            chunk, drawn = self.lines.feed(stream, data, came)
            if chunk is not None:
                self.failure.scan(chunk)
            for i, b in enumerate(self.marks.scan(chunk, drawn)):
                # a line an earlier read began (`cycle 1` then its newline with `cycle 2`:
                # an unbuffered print's two writes) is a cycle of that moment; the read's
                # first boundary of the moment it came; a later one in the same read (the
                # last of several cycles' lines) of the moment it is taken, after the first's
                # sample: where the watch lags (a slow CPU) each read then still gives two
                self.boundary(b, b.came if b.came is not None and b.came < came else
                              came if i == 0 else None)
            if self.marks.unnumbered and not self.told_unnumbered:
                self.told_unnumbered = True
                self.say(f"warning: the cycle pattern matched {self.marks.unnumbered!r}, "
                         f"but its first group is not a number: no cycle is marked by it")
        except Exception as exc:  # noqa: BLE001 - the watch must never stop the output
            self._broke(exc)
        self._signal()

    def _broke(self, exc: Exception) -> None:
        """A bug in the watch ends the watch, never the run (its output, its telemetry)."""
        self.broken = True
        self.say(f"warning: growth is no longer watched in this run ({type(exc).__name__}: "
                 f"{exc})")

    def boundary(self, b: Boundary, came: float | None = None) -> None:
        """A cycle's start: its row sampled, the trends fitted again (their CPU time counted
        in `cycle_cpu`). One unit's boundaries that came (were read) closer than
        MIN_BOUNDARY_S are one."""
        began = time.thread_time()
        try:
            self._boundary(b, came)
        finally:
            self.cycle_cpu += time.thread_time() - began

    def _boundary(self, b: Boundary, came: float | None) -> None:
        if self.sampler is None or b.unit in self.dropped:
            return
        came = time.monotonic() if came is None else came
        if came - self.marked_at.get(b.unit, -1e9) < MIN_BOUNDARY_S:
            return
        self.marked_at[b.unit] = came
        if self.book is None:
            from launcher.telemetry.growth import CycleBook

            self.book = CycleBook()
        self.sampler.sample({"cycle": b.to_json()})
        self.units[b.unit] += 1
        # a line alone is no loop: its unit counts from its second cycle
        self.real_unit = self.real_unit or active_unit(self.units) not in (None, WINDOW)
        if not self.real_unit and b.unit != WINDOW:
            return
        cycles = self.book.update(self.sampler.rows)
        self._trim()
        self.assess(cycles)
        self._pace(cycles)

    def _trim(self) -> None:
        """The rows before the open cycle's are in the book's closed cycles (and in
        telemetry.jsonl): dropped, so a long run's memory and each fit stay small."""
        drop = self.book.start
        if drop > 0:
            del self.sampler.rows[:drop]
            self.book.dropped(drop)

    def _pace(self, cycles: list[Any]) -> None:
        """Short cycles are sampled faster (Sampler.pace)."""
        steps = sorted(c.seconds for c in cycles if c.seconds)
        if steps:
            self.sampler.pace(steps[len(steps) // 2])

    def on_sample(self, row: dict[str, Any]) -> None:
        """Each periodic sample: time stands in for cycles until a line marks them (windows
        that suit the run's length, or growth.window's fixed ones)."""
        if self.broken or self.sampler is None:
            return
        if self.real_unit and not self._stale(row):
            return
        try:
            if self.options.window is None:
                self._in_time(row)
            elif row["t"] >= self.next_window:
                window = self.options.window
                n = int(self.next_window // window)
                self.next_window += window
                self.boundary(Boundary(WINDOW, n, None, f"{window:g} s window {n}"))
        except Exception as exc:  # noqa: BLE001 - as in output
            self._broke(exc)
        self._signal()

    def _stale(self, row: dict[str, Any]) -> bool:
        """Whether the counter taken as cycles stopped marking them (its numbers jumped, or
        it fell silent): the open cycle has lasted STALE_CYCLES times the closed ones'
        median. Then it is dropped, and time windows take over from its last boundary (the
        rows kept since: the open cycle's)."""
        book = self.book
        if book is None or book.open is None or len(book.closed) < 3 or book.unit is None:
            return False
        lengths = sorted(c.seconds for c in book.closed[-20:] if c.seconds)
        if not lengths:
            return False
        if row["t"] - book.open.t0 < max(STALE_CYCLES * lengths[len(lengths) // 2],
                                         STALE_MIN_S):
            return False
        self.dropped[book.unit] = book.open.t0
        self.real_unit = active_unit(
            Counter({u: k for u, k in self.units.items() if u not in self.dropped})) not in (
            None, WINDOW)
        if self.real_unit:  # another unit still counts
            return False
        from launcher.telemetry.timeline import Timeline

        self.timeline = Timeline(self.sampler.interval)
        for r in self.sampler.rows[book.start:-1] if book.start >= 0 else []:
            self.timeline.add(r)
        return True

    def _in_time(self, row: dict[str, Any]) -> None:
        """A sample into the time windows; at each window's close, the fit over them."""
        from launcher.telemetry.timeline import Timeline, fit_time

        if self.timeline is None:
            self.timeline = Timeline(self.sampler.interval)
        if not self.timeline.add(row):
            return
        self._trim_time()
        cycles = self.timeline.cycles()
        self.assess(cycles, fit_time(cycles, now=row["t"]), unit=WINDOW)

    def _trim_time(self) -> None:
        """The windows hold what the rows said: the rows are dropped, but for those from a
        line that may yet mark cycles (its unit's first) on, for the book."""
        rows = self.sampler.rows
        first = next((i for i, r in enumerate(rows) if r.get("cycle")), None)
        drop = len(rows) - 4 if first is None else max(first, len(rows) - KEPT_ROWS)
        if drop > 0:
            del self.sampler.rows[:drop]

    def assess(self, cycles: list[Any], found: list[Trend] | None = None,
               unit: str | None = None) -> None:
        """The trends fitted again over the book's cycles (or the time windows' `found`), at
        each boundary: a line said when one is sure and has moved, and the stop decided."""
        from launcher.telemetry.growth import first_death, fit_all
        from launcher.telemetry.growth_words import live_line

        rows = self.sampler.rows
        now = rows[-1]["t"] if rows else 0.0
        if found is None:
            if not cycles or self.book is None or self.book.unit is None:
                return
            unit = self.book.unit
            found = fit_all(unit, cycles, now=now, total=self.book.total)
        death = first_death(found)
        if death is None or not cycles:
            return
        current = cycles[-1].n
        if self._moved(death):
            line = live_line(death)
            if not self.said:  # the first line says what it took as cycles
                line += self._basis(unit, cycles)
            self.said.append(Said(now, current, line, death.to_json()))
            self.shown = death
            self.say(f"growth: {line}")
        # stopped with one cycle's growth to spare: a cycle's peak varies (a k-fold's fit
        # starts more threads in some folds than others), and a stop a cycle late is a death
        spare = SPARE_WINDOWS if unit == WINDOW else SPARE_CYCLES
        if self.options.stop and self.stopped is None and death.reached is not None and (
                death.reached <= current + spare or (
                    unit != WINDOW and rows and _no_room(death, rows[-1], spare))):
            self._stop(death, current, now)

    def _basis(self, unit: str | None, cycles: list[Any]) -> str:
        if unit == WINDOW:
            width = cycles[1].t0 - cycles[0].t0 if len(cycles) > 1 else 0.0
            return (f" [no line marks a cycle: {width:.3g} s windows of time]"
                    if self.options.window is None else
                    f" [no line marks a cycle: growth.window's {self.options.window:g} s "
                    f"windows]")
        line = self.marks.example.get(unit or "", "")
        return f" [cycles: lines like {line!r}]" if line else ""

    def _moved(self, t: Trend) -> bool:
        """Said again only when the projection moves materially: another limit, or its cycle
        by more than 2 cycles and 10% of the cycles ahead."""
        from launcher.telemetry.series import SERIES

        s = self.shown
        if s is None or SERIES[s.series].limit_key != SERIES[t.series].limit_key or (
                s.limit != t.limit) or s.unit != t.unit:
            return True
        if t.unit == WINDOW and s.reached_s is not None and t.reached_s is not None:
            width = 60 * t.per_cycle / t.per_minute if t.per_minute else 1.0
            ahead = max(width, t.reached_s - (t.last - 1) * width)
            return abs(t.reached_s - s.reached_s) > max(2 * width, 0.1 * ahead)
        assert s.reached is not None and t.reached is not None
        ahead = max(1, t.reached - t.last)
        return abs(t.reached - s.reached) > max(2, 0.1 * ahead)

    def _signal(self) -> None:
        """The stop's SIGTERM, once, after the boundary that decided it (the output keeps
        being read while the workload writes its checkpoint); its SIGKILL after the grace is
        the caller's (`later`), which drops it should the run end first."""
        if self.stop is None or self.stopped is None or self.signalled:
            return
        self.signalled = True
        self.stop(15)
        if self.later is not None:
            self.later(STOP_GRACE_S)

    def _stop(self, t: Trend, current: int, now: float) -> None:
        from launcher.telemetry.growth_words import show, step
        from launcher.telemetry.series import SERIES

        s = SERIES[t.series]
        lim = show(t.series, t.limit) if t.limit else "?"
        if t.unit == WINDOW:
            at = f"at ~{t.reached_s:.0f} s" if t.reached_s is not None else "next"
            why = (f"stopped at {now:.0f} s ({self.options.stop_by}): {s.word} {step(t)} "
                   f"would pass {s.limit_word} {lim} {at} ({SPARE_WINDOWS} windows' growth to "
                   f"spare)")
            self.stopped = {"t": now, "cycle": current, "unit": t.unit, "why": why,
                            "trend": t.to_json()}
            self.say(f"growth: {why}; SIGTERM now, SIGKILL after {STOP_GRACE_S:g} s")
            return
        if t.reached is not None and t.reached > current:  # the margin: one cycle's growth
            when = (f"in {t.unit} ~{t.reached}, so it stops as {t.unit} {current} starts (one "
                    f"{t.unit}'s growth to spare: a {t.unit}'s peak varies)")
        else:
            when = f"in {t.unit} {current}, the one about to start"
        why = (f"stopped before {t.unit} {current} ({self.options.stop_by}): {s.word} "
               f"{step(t)} would pass {s.limit_word} {lim} {when}")
        self.stopped = {"t": now, "cycle": current, "unit": t.unit, "why": why,
                        "trend": t.to_json()}
        self.say(f"growth: {why}; SIGTERM now, SIGKILL after {STOP_GRACE_S:g} s")

    def result(self) -> dict[str, Any]:
        return {"said": [s.__dict__ for s in self.said], "stopped": self.stopped,
                "failure_text": self.failure.found, "dropped": dict(self.dropped)}
