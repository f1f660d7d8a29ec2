"""Growth in words: the amounts, the steps, the line said while a run goes (`threads +7 per
fold (folds 2-4): pids.max 50 reached in fold ~5, in ~40 s; ...`) and the clause of a death.
The fit and its series are growth.py's; this module only says what they found."""

from __future__ import annotations

from launcher.telemetry.cycles import WINDOW
from launcher.telemetry.growth import Trend
from launcher.telemetry.series import SERIES
from launcher.threadpools import UNNAMED


def show(key: str, value: float) -> str:
    from launcher.units import format_size

    if SERIES[key].in_bytes:
        return format_size(int(value))
    return f"{value:g}" if value != int(value) else f"{int(value):,}"


def step(t: Trend) -> str:
    """`+7 per fold`, `+20MiB per cycle`; `+20MiB per cycle at each cycle's peak` where what
    grows is what a cycle needs, not what it keeps; over time, `+19 a second`."""
    if t.unit == WINDOW and t.per_minute is not None:
        fast = t.per_minute >= 60 * ((1 << 20) if SERIES[t.series].in_bytes else 1)
        per, rate = ("second", t.per_minute / 60) if fast else ("minute", t.per_minute)
        return f"+{_amount(t.series, rate)} a {per}"
    peak = f" at each {t.unit}'s peak" if t.of == "peak" else ""
    return f"+{_amount(t.series, t.per_cycle)} per {t.unit}{peak}"


def _amount(key: str, value: float) -> str:
    return show(key, value) if SERIES[key].in_bytes else f"{value:.3g}"


def seen(t: Trend) -> str:
    """What was fitted: `folds 2-4`; over time, `12-40 s`."""
    if t.unit == WINDOW and t.per_minute is not None and t.per_cycle:
        width = 60 * t.per_cycle / t.per_minute
        return f"{(t.first - 1) * width:.0f}-{t.last * width:.0f} s"
    return f"{t.unit}s {t.first}-{t.last}"


def at(t: Trend, n: int | None = None) -> str:
    """Where a limit falls: `in fold ~6`; over time, `at ~109 s`."""
    if t.unit == WINDOW:
        return f"at ~{t.reached_s:.0f} s" if t.reached_s is not None else "later"
    return f"in {t.unit} ~{t.reached if n is None else n}"


def slowing_words(t: Trend) -> str:
    return " (slowing: projected from its newer half's rate)" if t.slowing else ""


def process_words(t: Trend) -> str:
    """`: run.log open 37 times in python3 (pid 42)` where a census named what grew, else
    `; most in python3 (pid 42)` where the tree has several processes."""
    if t.what:
        return f": {t.what}"
    return f"; most in {t.process}" if t.process else ""


def pool_words(t: Trend) -> str:
    if not t.pool:
        return ""
    if t.pool == UNNAMED:
        whose = t.pool_hint or "Python threads, OpenMP or OpenBLAS workers"
        return (f"; the growing threads are unnamed (they carry their creator's name, "
                f"{', '.join(t.pool_names) or '?'}): {whose}")
    names = f" ({', '.join(t.pool_names)})" if t.pool_names else ""
    return f"; the growing threads are {t.pool}'s{names}"


def live_line(t: Trend, *, ended: bool = False) -> str:
    """`threads +7 per fold (folds 2-4): pids.max 50 reached in fold ~5, in ~40 s; ...`
    (`ended`: for a report after the run, without the time from now)."""
    s = SERIES[t.series]
    when = "" if ended else "in the one now running" if t.in_s == 0 else (
        f"in ~{t.in_s:.0f} s" if t.in_s is not None else "")
    lim = show(t.series, t.limit) if t.limit else "?"
    return (f"{s.word} {step(t)}{slowing_words(t)} ({seen(t)}): {s.limit_word} {lim} reached "
            f"{at(t)}{', ' + when if when else ''}{pool_words(t)}{process_words(t)}")


def death_clause(t: Trend, died_in: int | None, fix: str, *,
                 limit_word: str | None = None, ended_s: float | None = None) -> str:
    """`threads grew +7 per fold in tf.data's pool; pids.max 50 was reached in fold 4; a
    higher limit only delays it: FIX`"""
    s = SERIES[t.series]
    where = (" among its unnamed threads" if t.pool == UNNAMED else
             f" in {t.pool}'s pool" if t.pool else "")
    lim = "" if limit_word or not t.limit else f" {show(t.series, t.limit)}"
    when = (f" at {ended_s:.0f} s" if t.unit == WINDOW and ended_s is not None else
            f" in {t.unit} {died_in}" if died_in is not None and t.unit != WINDOW else
            f" at {ended_s:.0f} s" if ended_s is not None else "")
    return (f"{s.word} grew {step(t)}{where}{process_words(t)}; {limit_word or s.limit_word}"
            f"{lim} was reached{when}; a higher limit only delays it: {fix}")
