"""Growth in scripts as people write them (issue 39): cycles from any counter a line prints, or
from time where nothing marks one; growth that slows; every limit, and the process, named."""

from __future__ import annotations

import math
import random
import re
from typing import Any

import pytest

from launcher.telemetry import growth, growth_words, timeline
from launcher.telemetry.cycles import COUNTER, CycleMarks, active_unit, shape
from tests.growth_runs import growth_said, launcher_run

# -- counters in any words ---------------------------------------------------------------------


def _marks(lines: list[str]) -> list[tuple[str, int]]:
    """Each line written and flushed alone, as a loop's print does."""
    m = CycleMarks()
    return [(b.unit, b.n) for x in lines for b in m.feed("stdout", f"{x}\n".encode())]


def test_a_chunk_of_lines_is_read_at_once_and_marks_its_last():
    m = CycleMarks()
    got = m.feed("o", b"".join(f"sample {i} of 9000 ok\n".encode() for i in range(1, 900)))
    # lines that came at once are one moment: a boundary for each length of the number
    assert [(b.unit, b.n) for b in got] == [("sample", 9), ("sample", 99), ("sample", 899)]
    assert got[-1].line == "sample 899 of 9000 ok"
    more = m.feed("o", b"".join(f"sample {i} of 9000 ok\n".encode() for i in range(900, 950)))
    assert [b.n for b in more] == [949]
    gap = m.feed("o", b"sample 990 of 9000 ok\n")  # 40 lines missing: no counter's step
    assert gap == [] and m.feed("o", b"sample 991 of 9000 ok\n") == []
    words = CycleMarks().feed("o", b"".join(f"step {i}: loss 0.5\n".encode()
                                            for i in range(1, 300)))
    # a familiar word's shape: its first and last line (one shape for each length of number)
    assert [b.n for b in words] == [1, 9, 10, 99, 100, 299]


def test_a_line_that_repeats_with_a_number_counting_up_marks_cycles_from_its_third():
    got = _marks([f"Process 0, rank {i}: {10 + 4 * i} open FDs" for i in range(1, 6)])
    assert got == [("rank", 3), ("rank", 4), ("rank", 5)]  # the FDs (+4) are no counter
    assert _marks([str(i) for i in range(7, 12)]) == [(COUNTER, 9), (COUNTER, 10), (COUNTER, 11)]
    # every 100th step counts in its own stride
    assert _marks([f"saved {i} rows" for i in range(100, 600, 100)])[0] == ("saved", 300)


def test_a_number_that_grows_by_other_steps_is_no_counter():
    # celery/billiard#282's loop prints its open connections: +4 a pool
    assert _marks([f"Open connections: {4 * i}" for i in range(1, 9)]) == []
    assert _marks([f"kept {i * i} items" for i in range(1, 9)]) == []


def test_the_familiar_words_are_a_fast_path():
    assert _marks(["Process 0, iteration 1: 14 open FDs", "iteration 2"]) == [
        ("iteration", 1), ("iteration", 2)]
    assert [u for u, _ in _marks(["Trial 1", "round 2", "generation 3", "batch 4", "iter 5"])
            ] == ["trial", "round", "generation", "batch", "iter"]


@pytest.mark.parametrize("make", [
    lambda i: f"2026-11-27 12:00:{i:02d},123 INFO training",  # a timestamp's seconds
    lambda i: f"[{i}.{i}s] loss {0.5 / i:.3f}",  # a duration, a loss
    lambda i: f"allocated {i} MB",  # a size
    lambda i: f"{i}% done",  # a share
    lambda i: f"layer conv2d_{i} built",  # a name's digits
    lambda i: f"t={1764000000 + i}",  # a Unix time
])
def test_times_losses_sizes_and_names_never_count(make: Any):
    assert _marks([make(i) for i in range(1, 12)]) == []


def test_progress_bar_redraws_never_count_but_their_words_do():
    m = CycleMarks()
    bar = b"".join(f"\r{i}/100 [{'=' * (i // 10)}]".encode() for i in range(1, 60))
    assert m.feed("stderr", bar + b"\n") == []
    tqdm = CycleMarks()
    got = [b for redraw in (b"Epoch 3: 4%|", b"\rEpoch 3: 50%|", b"\rEpoch 4: 1%|",
                            b"\rEpoch 4: 9%|") for b in tqdm.feed("stderr", redraw)]
    assert [(b.unit, b.n) for b in got] == [("epoch", 3), ("epoch", 4)]
    # a bar's last redraw, ended by its newline, is no counter's line either
    bars = CycleMarks()
    got = [b for k in range(1, 6) for piece in (f"\rloaded {k} of 5 shards", "\n")
           for b in bars.feed("stderr", piece.encode())]
    assert got == []
    # a CRLF line is one line, not a redraw
    crlf = CycleMarks()
    assert [b.n for i in range(1, 5) for b in crlf.feed("o", f"sample {i} ok\r\n".encode())
            ] == [3, 4]


def test_a_shape_keeps_what_only_looks_like_a_number():
    key, numbers, words = shape("Process 0, iteration 12: 57 open FDs 1.5e-3 12:04:05 3s")
    assert numbers == [0, 12, 57] and key.count("#") == 3 and words[1] == "iteration"


def test_one_line_is_no_loop_and_the_outermost_counter_wins():
    assert active_unit(["epoch"]) is None  # "Epoch 1/100" once, at the start
    assert active_unit(["step", "step", "epoch", "epoch"]) == "epoch"
    assert active_unit(["rank", "rank", "rank", "trial", "trial"]) == "trial"  # words first
    # of other counters, the one that counted least: the outer loop
    assert active_unit(["sample"] * 9 + ["chunk"] * 3) == "chunk"
    assert active_unit(["window", "window"]) == "window"


# -- time where nothing marks a cycle ----------------------------------------------------------


def _first_said(rows: list[dict[str, Any]]) -> tuple[float, growth.Trend] | None:
    line = timeline.Timeline()
    for r in rows:
        if line.add(r):
            sure = [t for t in timeline.fit_time(line.cycles(), now=r["t"]) if t.confident]
            if sure:
                return r["t"], sure[0]
    return None


def test_time_windows_double_and_keep_the_least_and_most():
    line = timeline.Timeline()
    for t in range(200):
        line.add({"t": float(t), "threads": t, "pids_max": 1000})
    cycles = line.cycles()
    assert line.width == 8.0 and len(cycles) <= timeline.MAX_WINDOWS
    assert cycles[0].floor["threads"] == 0 and cycles[0].peak["threads"] == 7
    assert cycles[-1].t1 is None and all(c.t1 for c in cycles[:-1])
    # a floor is the least from its window on: what a collector freed later was not kept
    line = timeline.Timeline()
    for t, v in enumerate([5, 9, 9, 3, 4]):
        line.add({"t": float(t), "threads": v})
    assert [c.floor["threads"] for c in line.cycles()] == [3, 3, 3, 3, 4]


def test_a_silent_leak_is_foreseen_a_third_of_the_run_ahead_at_any_length():
    rng = random.Random(3)
    for seconds, per_s, limit in ((60, 20.0, 1250), (36000, 1 / 60, 700)):
        rows = [{"t": float(t), "threads": 50 + int(per_s * t) + rng.randint(0, 2),
                 "pids_max": limit} for t in range(0, seconds)]
        died = (limit - 50) / per_s
        got = _first_said(rows)
        assert got is not None, seconds
        t, trend = got
        assert (died - t) / died >= 1 / 3, (seconds, t, died)
        assert trend.reached_s is not None and abs(trend.reached_s - died) < 0.15 * died


@pytest.mark.parametrize("name, value", [
    ("flat", lambda t, r: 200 + r.randint(-5, 5)),
    ("sawtooth", lambda t, r: 200 + (t % 12) * 10 if t % 12 < 10 else 200),
    ("import, then flat", lambda t, r: min(t, 8) * 100),
    ("steps", lambda t, r: 200 + 50 * (t // 200)),  # a cache that fills once a phase
])
def test_no_line_for_a_run_that_does_not_grow(name: str, value: Any):
    rng = random.Random(5)
    rows = [{"t": float(t), "rss_bytes": value(t, rng) << 20, "memory_limit_bytes": 1 << 30}
            for t in range(0, 900)]
    assert _first_said(rows) is None, name


@pytest.mark.parametrize("period", [60, 150, 200])
def test_a_slow_sawtooth_says_nothing_after_its_first_ramp(period: int):
    """Its first ramp is growth as far as anyone can tell; each later one climbs no higher."""
    rows = [{"t": float(t), "rss_bytes": (200 + 300 * (t % period) // period) << 20,
             "memory_limit_bytes": 700 << 20} for t in range(0, 1500)]
    line, said = timeline.Timeline(), []
    for r in rows:
        if line.add(r) and r["t"] > period:
            found = timeline.fit_time(line.cycles(), now=r["t"])
            said += [r["t"] for t in found if t.confident]
    assert said == []


def test_growth_that_slows_is_projected_from_its_newer_rate_and_says_so():
    rows = [{"t": float(t), "threads": 50 + int(300 * math.sqrt(t / 100)), "pids_max": 400}
            for t in range(0, 200)]
    got = _first_said(rows)
    assert got is not None
    _, trend = got
    assert trend.slowing and "(slowing: projected from its newer half's rate)" in (
        growth_words.live_line(trend))
    died = 100 * ((400 - 50) / 300) ** 2  # 136 s
    assert trend.reached_s is not None and trend.reached_s <= died  # never after the death
    steady = [{"t": float(t), "threads": 50 + 3 * t, "pids_max": 400} for t in range(0, 100)]
    got = _first_said(steady)
    assert got is not None and not got[1].slowing


# -- real processes, through launcher run ------------------------------------------------------


def test_a_leak_that_prints_nothing_is_foreseen_and_its_death_named(tmp_path):
    rc, out, summary = launcher_run(tmp_path, "limits:\n  pids: 120\n", "--threads", "1",
                                    "--cycles", "400", "--seconds", "0.2", "--say", "")
    g = summary["growth"]
    said = growth_said(out)
    assert rc != 0 and said, out
    assert g["unit"] == "window" and "[no line marks a cycle:" in said[0], said
    end = summary["duration_s"]
    assert (end - g["said"][0]["t"]) / end >= 1 / 3, (g["said"], end)
    assert "threads grew +" in summary["diagnosis"] and " a second" in summary["diagnosis"]
    assert "pids.max 120 was reached at " in summary["diagnosis"], summary["diagnosis"]


def test_a_silent_leak_is_stopped_before_its_limit_with_75(tmp_path):
    rc, out, summary = launcher_run(tmp_path, "limits:\n  pids: 120\n", "--threads", "1",
                                    "--cycles", "400", "--seconds", "0.2", "--say", "",
                                    flags=("--stop-before-limit",))
    assert rc == 75, out
    assert summary["growth"]["stopped"]["unit"] == "window"
    assert "can't start new thread" not in out  # stopped before it met the limit


def test_a_leak_printing_its_own_counter_is_foreseen_in_its_words(tmp_path):
    rc, out, summary = launcher_run(
        tmp_path, "limits:\n  nofile: 160\n", "--files", "4", "--cycles", "100",
        "--seconds", "0.3", "--say", "Process 0, iteration {n}: {files} open FDs")
    g = summary["growth"]
    said = growth_said(out)
    assert rc != 0 and said, out
    assert g["unit"] == "iteration", g["unit"]
    # +4 a line; under load a boundary's reading may come after that cycle's opens (+3.8)
    rate = re.search(r"open files \+([\d.]+) per iteration", said[0])
    assert rate and 3.5 <= float(rate[1]) <= 4.5, said
    assert "[cycles: lines like 'Process 0, iteration 1: " in said[0], said
    assert "RLIMIT_NOFILE 160 was reached in iteration" in summary["diagnosis"], summary


def test_a_death_of_open_files_is_named_from_the_words_and_the_runs_own_last_reading():
    """pytorch#11201: +900 open files a second, then torch's own "Too many open files": the
    last window (cut short) is left out of the fit, the run's last reading is not."""
    from launcher.telemetry.growth_verdict import growth_record

    rows = [{"t": t / 2, "files": 5 + 30 * t, "nofile": 1024, "threads": 3}
            for t in range(0, 66)]  # 1955 at the end: past the limit's 95% only at the end
    rows = [r for r in rows if r["files"] <= 1020]
    watched = {"said": [], "stopped": None,
               "failure_text": {"files": "RuntimeError: Too many open files. Communication "
                                         "with the workers is no longer possible."}}
    record = growth_record(rows, watched, {"reason": "exit", "diagnosis": "exit 1"}, status=1)
    assert record["diagnosis"] is not None, record
    assert record["diagnosis"].startswith("open files grew +60 a second;"), record["diagnosis"]
    assert "RLIMIT_NOFILE 1,024 was reached at" in record["diagnosis"]


def test_a_memory_death_after_minutes_held_at_the_limit_is_named_from_the_growth_said():
    """pytorch#35600 on a busy host: memory rose 4 MiB a second to within 5% of its limit,
    then held there for minutes (reclaim thrashing its libraries' pages) until the OOM kill.
    The run's whole fit is flat at its end; the growth the watch said while it ran led there."""
    from launcher.telemetry.growth import first_death
    from launcher.telemetry.growth_verdict import growth_record

    mib, limit = 1 << 20, 1 << 30
    rows = [{"t": float(t), "memory_bytes": min(300 * mib + 4 * mib * t, limit - 40 * mib),
             "memory_limit_bytes": limit, "threads": 20} for t in range(0, 400)]
    at = 120  # said here, as the watch does: its first sure projection
    _, _, found = timeline.trends(rows[:at], now=rows[at - 1]["t"])
    death = first_death(found)
    assert death is not None and death.series == "memory_bytes", found
    said = [{"t": float(at), "cycle": death.last, "line": "memory ...",
             "trend": death.to_json()}]
    ended = {"reason": "oom", "diagnosis": "the memory limit of 1GiB killed the workload"}
    quiet = growth_record(rows, {"said": [], "stopped": None}, ended, status=137)
    assert quiet["diagnosis"] is None, quiet  # the end alone: flat, no growth to name
    record = growth_record(rows, {"said": said, "stopped": None}, ended, status=137)
    assert record["diagnosis"] is not None, record
    assert record["diagnosis"].startswith("memory grew +4MiB a second;"), record["diagnosis"]
    assert "the memory limit 1GiB was reached at 399 s" in record["diagnosis"], record
