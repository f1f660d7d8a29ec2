"""`launcher report RUN_DIR --profile OTHER`: a recorded run replayed against another profile's
limits (the 5-GPU server's pids 7680, a pod's, Podman's default 2048), before anyone rents
the machine: whether it would have died there, in which cycle and of what.

Each limit the other profile sets is held against the run's own cycles, peak by peak; where
the recording ends first, the run's growth (if it grows) is projected on to it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.errors import LauncherError

# profile key -> the series it limits
LIMITED = {"limits.pids": ("threads",), "limits.memory": ("memory_bytes", "rss_bytes"),
           "limits.nofile": ("files",)}


@dataclass(frozen=True)
class Verdict:
    series: str
    limit: int
    key: str  # the profile key, with its file and line
    cycle: int | None  # the cycle it would die in; None: it would not
    recorded: bool  # True: the recording itself passes the limit there; False: projected
    peak: float | None  # the run's peak (the recorded cycle's, where it passes)
    sentence: str


def other_limits(profile: str) -> tuple[str, dict[str, tuple[int, str]]]:
    """(the profile's name, series -> (limit, where it is set)) for the limits it sets."""
    from launcher.profiles import load_profile
    from launcher.units import parse_size

    prof = load_profile(profile)
    out: dict[str, tuple[int, str]] = {}
    for key, series in LIMITED.items():
        value = prof.get(key)
        if value is None or value in ("auto", "unlimited"):
            continue
        limit = parse_size(value) if key == "limits.memory" else int(value)
        for s in series:
            out[s] = (limit, f"{key} {value} ({prof.where(key)})")
    return prof.name, out


def replay(rows: list[dict[str, Any]], profile: str) -> tuple[str, list[Verdict]]:
    from launcher.telemetry.growth_words import at, show, step
    from launcher.telemetry.series import SERIES
    from launcher.telemetry.timeline import trends

    name, limits = other_limits(profile)
    if not limits:
        raise LauncherError(f"--profile {profile}: it sets none of {', '.join(LIMITED)}, so "
                            f"there is nothing to hold the run against")
    unit, cycles, found = trends(rows, limits={k: v[0] for k, v in limits.items()},
                                 ended=True)
    out = []
    if any(isinstance(r.get("memory_bytes"), int | float) for r in rows):
        limits.pop("rss_bytes", None)  # the cgroup's working set meets a memory limit; a
        # tree's RSS counts shared pages once per process (8 forked loaders: 8 times)
    for series, (limit, where) in limits.items():
        peaks = [(c.n, c.peak[series]) for c in cycles if series in c.peak]
        overall = max((r[series] for r in rows if isinstance(r.get(series), int | float)),
                      default=None)
        if overall is None:
            continue  # not recorded (no memory cgroup of its own: the RSS stands in)
        s = SERIES[series]
        shown = show(series, limit)
        passed = next(((n, p) for n, p in peaks if p > limit), None)
        before = unit is None or not peaks or (overall > limit and passed is None)
        if passed is not None:
            n, p = passed
            sentence = (f"{s.limit_word} {shown}: it would have died {_where(unit, cycles, n)}, "
                        f"where its {s.word} reached {show(series, p)}")
            out.append(Verdict(series, limit, where, n, True, p, sentence))
            continue
        if overall > limit and before:
            sentence = (f"{s.limit_word} {shown}: it would have died before its cycles (its "
                        f"{s.word} peaked at {show(series, overall)})")
            out.append(Verdict(series, limit, where, None, True, overall, sentence))
            continue
        t = next((t for t in found if t.series == series and t.grows), None)
        total = next((r["cycle"].get("total") for r in reversed(rows)
                      if r.get("cycle") and r["cycle"]["unit"] == unit), None)
        if t is not None and t.reached is not None and total and t.reached > total:
            base = next(c for c in cycles if c.n == t.last)  # the last cycle fitted (the
            # one the run ended in, cut short, is not)
            at_end = base.floor[series] + t.per_cycle * (total - t.last)
            sentence = (f"{s.limit_word} {shown}: it would have run to the end ({unit} "
                        f"{total}: ~{show(series, at_end)}, growing {step(t)})")
            out.append(Verdict(series, limit, where, None, False, overall, sentence))
            continue
        if t is not None and t.reached is not None:
            sentence = (f"{s.limit_word} {shown}: the recording ends first "
                        f"({_where(unit, cycles, cycles[-1].n, end=True)}), but its {s.word} grew "
                        f"{step(t)}: it would die {at(t)} if it went on")
            out.append(Verdict(series, limit, where, t.reached, False, overall, sentence))
            continue
        sentence = (f"{s.limit_word} {shown}: it would have run to the end (peak "
                    f"{show(series, overall)}, {100 * overall / limit:.0f}% of it"
                    f"{', and no growth' if unit else ''})")
        out.append(Verdict(series, limit, where, None, False, overall, sentence))
    return name, out


def first(verdicts: list[Verdict]) -> Verdict | None:
    """The limit it would die of first: a recorded death before a projected one."""
    dying = [v for v in verdicts if v.cycle is not None or (v.recorded and v.peak)]
    return min(dying, key=lambda v: (not v.recorded, v.cycle or 0), default=None)


def read_rows(run_dir: Path) -> list[dict[str, Any]]:
    from launcher.telemetry.summary import read_series

    path = run_dir / "telemetry.jsonl"
    if not path.is_file():
        raise LauncherError(f"{path}: no such file; is {run_dir} a run directory?")
    return read_series(path)


def _where(unit: str | None, cycles: list[Any], n: int, *, end: bool = False) -> str:
    """`in fold 5`; where time marked the growth, `at ~52 s` (a window's start or end)."""
    from launcher.telemetry.cycles import WINDOW

    if unit != WINDOW:
        return f"{unit} {n}" if end else f"in {unit} {n}"
    c = next(c for c in cycles if c.n == n)
    t = c.t1 if end and c.t1 is not None else c.t0
    return f"at {t:.0f} s" if end else f"at ~{t:.0f} s"

