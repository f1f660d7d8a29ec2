"""Pins of the growth watch's six modules (scripts/mutation.py maps this file first to them):
their public functions called directly over a small matrix of inputs, each output compared
whole (every sentence, key and number) with a golden file under tests/golden/pins/. The
end-to-end tests of tests/test_growth.py read a run's sentences loosely; these notice a
changed word, key, number or argument order at once (no subprocess, no sleep: a second or
two). The goldens are what the code does today (`pytest --update-golden` rewrites them; read
the diff before accepting one)."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from launcher.telemetry import (
    census,
    cycles,
    failures,
    growth,
    growth_verdict,
    growth_watch,
    growth_words,
)
from launcher.threadpools import UNNAMED, ThreadPool
from tests.conftest import GOLDEN, check_golden

PINS = GOLDEN / "pins"  # not ".../mutants": scripts/mutation.py copies no such folder


def _pin(name: str, value: Any, update: bool) -> None:
    text = json.dumps(value, indent=1, default=_plain) + "\n"
    check_golden(PINS / f"{name}.json", text, update)


def _plain(value: Any) -> Any:
    if hasattr(value, "to_json"):
        return value.to_json()
    if hasattr(value, "__dataclass_fields__"):
        return {k: getattr(value, k) for k in value.__dataclass_fields__}
    if isinstance(value, set | frozenset | tuple):
        return sorted(value, key=str)
    return repr(value)


# -- a recorded run: every series, some growing ----------------------------------------------

MiB = 1 << 20


def run_rows(n: int = 10, *, unit: str = "fold", total: int | None = 40) -> list[dict[str, Any]]:
    """A boundary row at each cycle's start and two samples in it: threads +7 a cycle (exact),
    memory +8 MiB a cycle with noise, the RSS beside it, VmSize's peaks growing over flat
    floors, VmData flat, memory maps +3 far from their limit, open files +25 near theirs."""
    rows: list[dict[str, Any]] = []
    noise = [0, 3, -2, 4, -1, 2, -3, 1, 0, 2, -2, 3]
    for i in range(n):
        t = 10.0 * i
        floor = {"threads": 3 + 7 * i, "memory_bytes": 100 * MiB + 8 * MiB * i + noise[i] * MiB,
                 "rss_bytes": 90 * MiB + 9 * MiB * i, "vm_size_bytes": 500 * MiB,
                 "vm_data_bytes": 300 * MiB, "maps": 100 + 3 * i, "files": 20 + 25 * i}
        limits = {"pids_max": 120, "memory_limit_bytes": 400 * MiB, "rlimit_as": 900 * MiB,
                  "rlimit_data": 2048 * MiB, "max_map_count": 65530, "nofile": 256}
        mark = {"t": t, **floor, **limits,
                "cycle": {"unit": unit, "n": i + 1, "total": total, "line": f"{unit} {i + 1}"},
                "census": {UNNAMED: {"python": 1 + 5 * i}, "tf.data": {"tf_data_iter": 2 * i},
                           "steady": {"steady": 2}},
                "loaded": {"TensorFlow": {"unnamed": "tf.data's private pools",
                                          "fix": "call clear_session() each fold"}}}
        if i:
            mark[growth.KERNEL_PEAK] = 150 * MiB + i
        peaks = {**floor, "threads": floor["threads"] + 4,
                 "vm_size_bytes": 500 * MiB + 30 * MiB * i,
                 "memory_bytes": floor["memory_bytes"] + 5 * MiB}
        rows += [mark, {"t": t + 3.0, **peaks, **limits}, {"t": t + 6.0, **floor, **limits}]
    return rows


def test_the_trends_of_a_recorded_run_are_pinned(update_golden):
    rows = run_rows()
    unit, cyc, found = growth.cycle_trends(rows, now=95.0)
    _, _, ended = growth.cycle_trends(rows, now=95.0, ended=True)
    _, _, timeless = growth.cycle_trends(rows)  # no time from now: from the last cycle's start
    _, _, what_if = growth.cycle_trends(rows, now=95.0, limits={"threads": 400, "files": None,
                                                           "memory_bytes": 200 * MiB})
    death = growth.first_death(found)
    out = {
        "unit": unit, "cycles": cyc, "trends": found, "ended": ended, "what_if": what_if,
        "in_s_timeless": [t.in_s for t in timeless],
        "first_death": death.series if death else None,
        "first_death_ended": getattr(growth.first_death(ended), "series", None),
        "died_in": growth.died_in(cyc), "died_in_none": growth.died_in([]),
        "record": growth.to_json(unit, cyc, found),
        "lines": [growth_words.live_line(t) for t in found],
        "lines_ended": [growth_words.live_line(t, ended=True) for t in found],
        "steps": [growth_words.step(t) for t in found],
        "pools": [growth_words.pool_words(t) for t in found],
        "deaths": [growth_words.death_clause(t, 7, "FIX") for t in found],
        "deaths_worded": [growth_words.death_clause(t, None, "FIX", limit_word="LIMIT")
                          for t in found],
    }
    _pin("growth_trends", out, update_golden)


def test_the_trend_sentences_of_each_pool_and_time_are_pinned(update_golden):
    base = growth.fit("threads", "fold", growth.cycles_of(run_rows())[1], now=95.0)
    assert base is not None
    variants = {
        "named_pool": {"pool": "tf.data", "pool_names": ("tf_data_iter", "tf_data_2")},
        "named_pool_no_names": {"pool": "tf.data", "pool_names": ()},
        "unnamed_no_hint": {"pool": UNNAMED, "pool_hint": None, "pool_names": ()},
        "unnamed_hint": {"pool": UNNAMED, "pool_hint": "HINT", "pool_names": ("python", "a")},
        "no_pool": {"pool": None},
        "now_running": {"in_s": 0.0},
        "no_time": {"in_s": None},
        "no_limit": {"limit": None},
        "peak": {"of": "peak", "series": "memory_bytes", "per_cycle": 3.5 * MiB,
                 "limit": 1.5 * (1 << 30)},
        "fraction": {"per_cycle": 2.25, "limit": 49.5},
        "files": {"series": "files", "limit": 1024.0, "per_cycle": 20.0},
    }
    out = {}
    for name, changes in variants.items():
        t = growth.Trend(**{**base.__dict__, **changes})
        out[name] = [growth_words.live_line(t), growth_words.step(t),
                     growth_words.pool_words(t), growth_words.death_clause(t, 4, "F"),
                     growth_words.death_clause(t, 4, "F", limit_word="W")]
    out["show"] = [growth_words.show("threads", 1234567.0), growth_words.show("threads", 2.5),
                   growth_words.show("memory_bytes", 1536.0), growth_words.show("maps", 7)]
    _pin("growth_sentences", out, update_golden)


def test_cycle_numbers_books_and_thinning_are_pinned(update_golden):
    def marks(*ns: int) -> list[dict[str, Any]]:
        return [{"cycle": {"n": n}} for n in ns]

    out: dict[str, Any] = {"numbered": [
        growth.numbered(marks(1, 2, 3)), growth.numbered(marks(5, 9)),
        growth.numbered(marks(3, 3, 4)), growth.numbered(marks(2, 1)),
        growth.numbered(marks(1, 2), after=4), growth.numbered(marks(6, 7), after=4),
        growth.numbered([], after=2)]}
    # the book, fed as the rows come; an outer loop appearing starts it again
    rows = run_rows(6, unit="epoch", total=None)
    book = growth.CycleBook()
    seen = []
    for k in range(1, len(rows) + 1):
        got = book.update(rows[:k])
        seen.append([book.unit, book.start, book.scanned, book.total,
                     [(c.n, c.t0, c.t1) for c in got]])
    rows.append({"t": 60.0, "threads": 1, "cycle": {"unit": "fold", "n": 2, "total": 3}})
    got = book.update(rows)
    seen.append([book.unit, book.start, book.total, [(c.n, c.t1) for c in got]])
    book.dropped(1)
    seen.append([book.start, book.scanned])
    # rows that no longer hold the open cycle's boundary: no cycle
    seen.append(book.update(rows[:book.start]))
    assert vars(growth.CycleBook()) == {"unit": None, "units": {}, "total": None,
                                        "closed": [], "open": None, "start": 0, "scanned": 0}
    assert growth.CycleBook().update([{"t": 0.0, "threads": 1}]) == []
    out["book"] = seen
    # a window unit, and a long run's cycles thinned in the record
    windows = [{"t": float(i), "threads": i, "cycle": {"unit": "window", "n": i + 1}}
               for i in range(2500)]
    unit, cyc = growth.cycles_of(windows)
    record = growth.to_json(unit, cyc, [])
    out["thinned"] = {k: v for k, v in record.items() if k != "cycles"}
    out["kept"] = [c["n"] for c in record["cycles"]][:5] + [len(record["cycles"])]
    out["kept_last"] = [c["n"] for c in record["cycles"]][-3:]
    out["few"] = growth.to_json("fold", cyc[:3], [])["cycles_kept"]
    out["empty"] = growth.cycle_trends([{"t": 0.0, "threads": 1}])
    _pin("growth_cycles", out, update_golden)


def test_gates_and_growing_pools_are_pinned(update_golden):
    s = growth.SERIES
    out: dict[str, Any] = {"series": list(s.values()), "constants": [
        growth.MIN_POINTS, growth.NOISY_STEPS, growth.COUNT_STEPS, growth.COUNT_SPREAD,
        growth.T_MIN, growth.SEEN_SHARE, growth.SURE_CYCLES, growth.KEPT_CYCLES,
        growth.KERNEL_PEAK]}
    out["gates"] = [
        growth.gate(s["threads"], [(1, 3), (2, 10), (3, 17), (4, 24)]),
        growth.gate(s["threads"], [(1, 3), (2, 5), (3, 8), (4, 10), (5, 13)]),
        growth.gate(s["threads"], [(1, 3), (3, 5), (5, 8), (9, 10)]),
        growth.gate(s["memory_bytes"], [(i, 1e6 * i + (i % 2) * 3e5) for i in range(1, 8)]),
        growth.gate(s["memory_bytes"], [(i, 50e3 * i) for i in range(1, 8)]),
        growth.gate(s["files"], [(1, 10), (2, 9), (3, 10), (4, 30)]),
        growth.gate(s["maps"], [(1, 10), (2, 13)]),  # one step: no spread
        growth.gate(s["rss_bytes"], [(1, 10e6), (3, 30e6)]),
    ]

    def cyc(*censuses: dict[str, dict[str, int]] | None) -> list[growth.Cycle]:
        return [growth.Cycle(i, 0.0, None, {}, {}, c, {}, {}) for i, c in enumerate(censuses)]

    out["pools"] = [
        growth.growing_pool(cyc({"a": {"x": 1}})),
        growth.growing_pool(cyc({"a": {"x": 1}}, None, {"a": {"x": 4, "y": 2}, "b": {"b": 5}})),
        growth.growing_pool(cyc({"a": {"x": 3}}, {"a": {"x": 1}})),
        growth.growing_pool(cyc({"a": {"p": 1}}, {"a": {"p": 2, "q": 5, "r": 3, "s": 4, "t": 1}})),
        growth.growing_pool(cyc({}, {})),
    ]
    _pin("growth_gates", out, update_golden)


# -- after the run: the record and the diagnosis ----------------------------------------------

def _threads_only(n: int, step: int, *, limit_key: str = "pids_max", limit: int = 60,
                  key: str = "threads") -> list[dict[str, Any]]:
    rows = []
    for i in range(n):
        mark = {"t": 5.0 * i, key: 4 + step * i, limit_key: limit,
                "cycle": {"unit": "fold", "n": i + 1, "total": None}}
        rows += [mark, {"t": 5.0 * i + 2, key: 4 + step * i + 2, limit_key: limit}]
    return rows


def test_growth_records_of_each_end_are_pinned(update_golden):
    full = run_rows()
    watched = {"said": [], "stopped": None, "failure_text": {}}
    at = {"nproc": 200, "uid": 1000, "uid_tasks_outside": 20, "pids_max": 120, "stack": 8 << 20,
          "threads_seen": 30, "address_space": 900 * MiB, "vm_size_seen": 500 * MiB,
          "threads_max": 5000}
    ends: dict[str, Any] = {}
    for reason in growth_verdict.DIED_OF:
        ends[reason] = growth_verdict.growth_record(
            full, watched, {"reason": reason, "diagnosis": "D."}, status=1)
    plain = [{k: v for k, v in r.items() if k != "loaded"} for r in full]
    for reason in ("oom", "pids", "files"):
        ends[f"{reason}_plain"] = growth_verdict.growth_record(
            plain, watched, {"reason": reason}, status=1)
    data = [{**r, "vm_data_bytes": 300 * MiB + 10 * MiB * r["threads"]} for r in full]
    ends["data_growing"] = growth_verdict.growth_record(data, watched, {"reason": "data"},
                                                        status=1)
    ends["oom_rss"] = growth_verdict.growth_record(
        [{k: v for k, v in r.items() if k != "memory_bytes"} for r in full], watched,
        {"reason": "oom"}, status=137)
    ends["peaks"] = growth_verdict.growth_record(
        [{k: v for k, v in r.items() if k not in ("memory_bytes", "rss_bytes")} for r in full],
        watched, {"reason": "as"}, status=1)
    ends["no_growth"] = growth_verdict.growth_record(
        _threads_only(6, 0), watched, {"reason": "pids"}, status=1)
    ends["pool_fix"] = growth_verdict.growth_record(
        _threads_only(6, 9), watched, {"reason": "pids"}, status=1)
    stopped = {**watched, "stopped": {"why": "stopped before fold 5 (--stop-before-limit): X"}}
    ends["stopped"] = growth_verdict.growth_record(full, stopped, {"reason": "exit"}, status=143)
    for name, words in (("files_words", {"files": "OSError: [Errno 24] Too many open files"}),
                        ("maps_words", {"memory": "Cannot allocate memory"}),
                        ("thread_words", {"thread": "RuntimeError: can't start new thread"})):
        ends[name] = growth_verdict.growth_record(
            full, {**watched, "failure_text": words},
            {"reason": "exit", "diagnosis": "the workload exited with status 1.",
             "limits_at_start": at}, status=1)
    ends["words_without_limits"] = growth_verdict.growth_record(
        _threads_only(3, 0), {**watched, "failure_text": {"thread": "pthread_create failed"}},
        {"reason": "exit"}, status=1)
    for reason in ("maps", "files", "pids", "signal"):  # no growth: the words name a limit
        ends[f"{reason}_no_growth_words"] = growth_verdict.growth_record(
            _threads_only(3, 0), {**watched, "failure_text": {"thread": "pthread_create: 11"}},
            {"reason": reason, "diagnosis": f"{reason} died.",
             "limits_at_start": {"pids_max": 50}}, status=1)
    at_pids = {"limits_at_start": {"pids_max": 50}}
    ends["words_no_diagnosis"] = growth_verdict.growth_record(
        _threads_only(3, 0), {**watched, "failure_text": {"thread": "pthread_create: 11"}},
        {"reason": "exit", **at_pids}, status=1)
    ends["words_diagnosis_x"] = growth_verdict.growth_record(
        _threads_only(3, 0), {**watched, "failure_text": {"thread": "pthread_create: 11"}},
        {"reason": "exit", "diagnosis": "it ended in MAX.", **at_pids}, status=1)
    ends["empty"] = growth_verdict.growth_record([], watched, {"reason": "exit"}, status=0)
    for record in ends.values():
        record.pop("cycles", None)  # pinned in growth_trends
    _pin("growth_records", ends, update_golden)


def test_the_words_reasons_of_a_last_cycle_are_pinned():
    _, cyc, found = growth.cycle_trends(run_rows(), now=95.0)
    both = {"files": "x", "memory": "y"}
    assert growth_verdict.words_reason(both, [], found) == []
    assert growth_verdict.words_reason(both, cyc, found) == ["files", None]
    assert growth_verdict.words_reason({"thread": "t"}, cyc, found) == [None, None]
    last = cyc[-1]

    def ending(maps: float, files: float) -> list[growth.Cycle]:
        peak = {**last.peak, "maps": maps, "files": files}
        return [*cyc[:-1], growth.Cycle(last.n, last.t0, None, last.floor, peak, None,
                                        dict(last.limits), {})]

    # sampled within 5% of the limit (65530 and 256), or not, with no trend to go by
    assert growth_verdict.words_reason(both, ending(62254.0, 243.2), []) == ["files", "maps"]
    assert growth_verdict.words_reason(both, ending(62253.0, 243.0), []) == [None, None]
    # the trend reaching the limit in the cycle after the last: met in this one
    assert growth_verdict.words_reason(both, ending(0.0, 0.0), found) == ["files", None]
    later = [growth.Trend(**{**t.__dict__, "reached": (t.reached or 0) + 1}) for t in found]
    assert growth_verdict.words_reason(both, ending(0.0, 0.0), later) == [None, None]
    flat = [growth.Trend(**{**t.__dict__, "grows": False}) for t in found]
    assert growth_verdict.words_reason(both, ending(0.0, 0.0), flat) == [None, None]
    unlimited = growth.Cycle(last.n, last.t0, None, last.floor, last.peak, None, {}, {})
    assert growth_verdict.words_reason(both, [unlimited], found) == [None, None]
    # a last window that died before its first sample: the limits last read stand, and the
    # run's own peak (its rows) is near the files' limit
    empty = growth.Cycle(last.n + 1, last.t0, None, {}, {}, None, {}, {})
    assert growth_verdict.words_reason(both, [*ending(0.0, 0.0), empty], [],
                                       {"files": 250.0}) == ["files", None]


# -- the workload's words ---------------------------------------------------------------------

FAILURE_LINES = [
    "RuntimeError: can't start new thread", "pthread_create failed: 11",
    "Thread creation failed: Resource temporarily unavailable", "failed to create thread",
    "E: thread creation via pthread_create() failed", "Resource temporarily unavailable",
    "cannot allocate memory for thread-local data: ABORT", "OSError: Cannot allocate memory",
    "terminate called after throwing an instance of 'std::bad_alloc'", "MemoryError",
    "memory allocation failed : growing buffer", "OSError: [Errno 24] Too many open files",
    "accept: EMFILE", "nothing to see",
]


def test_each_failure_text_is_found_by_its_kind(update_golden):
    out = []
    for line in FAILURE_LINES:
        text = failures.FailureText()
        text.feed(f"  {line}  \n".encode() + b"\xff tail")
        out.append([line, text.found, text.partial])
    split = failures.FailureText()
    split.feed(b"x\nMemoryE", "stderr")
    split.feed(b"rror\n", "stdout")
    split.feed(b"rror: one\n", "stderr")
    long = failures.FailureText()
    long.feed(("pthread_create " + "y" * 300 + "\n").encode())
    split.feed(b"\xfe Too many open files \xff\n", "stderr")
    full = failures.FailureText(found={"thread": "a", "memory": "b", "files": "c"})
    full.feed(b"MemoryError\n")
    out.append([split.found, split.partial, long.found, len(long.found["thread"]), full.found,
                full.partial, failures.GUARD])
    _pin("failures_texts", out, update_golden)


def test_the_likeliest_limit_of_each_kind_is_pinned(update_golden):
    at = {"nproc": 200, "uid": 1000, "uid_tasks_outside": 20, "pids_max": 120,
          "stack": 8 << 20, "threads_seen": 30, "address_space": 900 * MiB,
          "vm_size_seen": 500 * MiB, "data": 2048 * MiB, "vm_data_seen": 300 * MiB,
          "threads_max": 5000}
    thread = {"thread": "can't start new thread"}
    memory = {"memory": "Cannot allocate memory"}
    cases = {
        "all_thread": (thread, at), "all_memory": (memory, at),
        "both": ({**thread, **memory}, at),
        "files_only": ({"files": "Too many open files"}, at),
        "nothing": ({}, at), "no_limits": (thread, {}),
        "nproc_exempt": (thread, {**at, "nproc_exempt": True}),
        "nproc_alone": (thread, {"nproc": 50, "uid": 0, "uid_tasks_outside": 80}),
        "nproc_no_outside": (thread, {"nproc": 50, "uid": 7}),
        "pids_alone": (thread, {"pids_max": 77}),
        "as_alone": (thread, {"address_space": 64 * MiB, "stack": 2 << 20}),
        "as_seen": (memory, {"address_space": 64 * MiB, "vm_size_seen": 40 * MiB,
                             "threads_seen": 5}),
        "as_over": (memory, {"address_space": 64 * MiB, "vm_size_seen": 80 * MiB,
                             "threads_seen": 5}),
        "data_alone": (memory, {"data": 32 * MiB, "stack": 1 << 20}),
        "threads_max_alone": (thread, {"threads_max": 333}),
        "threads_max_memory": (memory, {"threads_max": 333}),
        "default_stack": (thread, {"address_space": 80 * MiB}),
        # the threads already running and the address space already mapped move the choice
        "as_running": (thread, {"address_space": 64 * MiB, "threads_seen": 5, "pids_max": 10}),
        "as_idle": (thread, {"address_space": 64 * MiB, "pids_max": 10}),
        "data_mapped": (thread, {"data": 96 * MiB, "vm_data_seen": 32 * MiB, "pids_max": 10}),
        "data_unmapped": (thread, {"data": 96 * MiB, "pids_max": 10}),
        "both_words_pids": ({**thread, **memory}, {"pids_max": 5, "address_space": 1 << 30}),
        "both_words_nproc": ({**memory, **thread}, {"nproc": 4, "uid": 3,
                                                    "address_space": 1 << 30}),
        "exempt_nproc": (thread, {"nproc": 5, "nproc_exempt": True, "pids_max": 50}),
    }
    _pin("failures_likeliest", {k: failures.likeliest(f, a) for k, (f, a) in cases.items()},
         update_golden)


# -- the cycles in the output ------------------------------------------------------------------

def test_cycle_marks_of_each_kind_of_line_are_pinned(update_golden):
    out: dict[str, Any] = {"units": cycles.UNITS, "custom": cycles.CUSTOM,
                           "window": cycles.WINDOW}
    marks = cycles.CycleMarks()
    text = (b"Fold #1 of 3\r\nEpoch 1/4\nepoch=2\nstep: 10\nstep 5\nEPOCH 3 / 4\ncycle 2\n"
            b"fold 2/3\nepoch 1/4\nepoch 1\nfold 2, epoch 2\nfold 1\n" + b"z" * 5000
            + b"\nfold 3\n")
    out["default"] = [b.to_json() for b in marks.feed("stdout", text)]
    out["last"] = marks.last
    marks.feed("stderr", b"w" * 5000)
    out["partial_dropped"] = dict(marks.partial)
    marks.feed("stderr", b"fold 9 ")
    out["partial_kept"] = dict(marks.partial)
    # bytes that are not UTF-8 are replaced, the line still read
    out["not_utf8"] = [b.to_json() for b in cycles.CycleMarks().feed(
        "o", b"\xff\xfe fold 4 \xc3\n\xe2\x82 epoch 2\n")]
    long = cycles.CycleMarks().feed("o", ("fold 1 " + "x" * 300 + "\n").encode())
    out["long"] = [len(long[0].to_json()["line"]), long[0].line[-3:]]
    patterns = {"group": r"round (\d+)", "named": r"(?P<total>\d+) left, round (?P<n>\d+)",
                "two": r"it (\d+) of (\d+)", "not_whole": r"it (\d+) loss (\S+)",
                "optional": r"it( \d+)?:", "none": r"^== next ==$", "word": r"phase (\w+)"}
    lines = (b"round 3\n9 left, round 4\nit 5 of 20\nit 6 loss 0.5\nit 7 of 20\nit:\n"
             b"== next ==\n== next ==\nphase one\nround 2\n")
    for name, pattern in patterns.items():
        m = cycles.CycleMarks(cycles.compile_pattern(pattern))
        out[name] = [[b.unit, b.n, b.total] for b in m.feed("out", lines)] + [
            m.unnumbered, m.counted]
    out["active"] = [cycles.active_unit(u) for u in (
        ["step", "epoch"], ["window", "cycle"], ["window"], [], ["other"], ["step", "fold"])]
    bad = []
    for text_ in ("(", "", "a|", r"(\d*)"):
        with pytest.raises(ValueError) as exc:
            cycles.compile_pattern(text_)
        bad.append(str(exc.value))
    out["bad"] = bad
    _pin("cycles_marks", out, update_golden)


# -- the census ---------------------------------------------------------------------------------

POOLS = (ThreadPool(r"tf_data", "tf.data", "stop tf.data"), ThreadPool(r"omp_", "OpenMP", ""),
         ThreadPool(r"cuda", "CUDA driver", "CUDA fix"))


def _proc(root: Path, pid: int, threads: dict[str, str], maps: bytes | None = None) -> None:
    for tid, name in threads.items():
        d = root / str(pid) / "task" / tid
        d.mkdir(parents=True)
        (d / "comm").write_text(name + "\n")
    if maps is not None:
        (root / str(pid)).mkdir(parents=True, exist_ok=True)
        (root / str(pid) / "maps").write_bytes(maps)


def test_a_census_of_a_proc_tree_is_pinned(tmp_path, update_golden):
    _proc(tmp_path, 10, {"10": "python", "11": "python", "12": "tf_data_iter", "13": "omp_1"})
    _proc(tmp_path, 20, {"20": "worker", "21": "cuda-EvtHandlr", "22": "tf_data_iter"})
    # a process whose main thread's name ends in X and is not UTF-8, threads that end while
    # they are read (no comm: gone; comm a directory: its read fails), each skipped alone
    _proc(tmp_path, 50, {str(t): f"w{t % 3}" for t in range(51, 60)})
    (tmp_path / "50/task/50").mkdir()
    (tmp_path / "50/task/50/comm").write_bytes(b"JA\xffX\n")
    for gone in (52, 55, 58):
        (tmp_path / f"50/task/{gone}/comm").unlink()
    for unreadable in (53, 57):
        (tmp_path / f"50/task/{unreadable}/comm").unlink()
        (tmp_path / f"50/task/{unreadable}/comm").mkdir()
    fds = len(os.listdir("/proc/self/fd"))
    names, mains = census.names_of([30, 10, 31, 50, 20], str(tmp_path))  # 30, 31: gone
    assert len(os.listdir("/proc/self/fd")) == fds  # each comm closed
    out: dict[str, Any] = {"names": dict(sorted(names.items())), "mains": sorted(mains)}
    out["group"] = census.group(names, mains, POOLS)
    # this process, from the real /proc (the default): its main thread's own name
    own, own_mains = census.names_of([os.getpid()])
    assert own_mains == {Path(f"/proc/{os.getpid()}/comm").read_text().strip()}
    assert sum(own.values()) == len(os.listdir(f"/proc/{os.getpid()}/task"))
    out["group_undeclared"] = census.group(names, mains, ())
    out["fixes"] = [census.fix_for(label, POOLS) for label in ("tf.data", "OpenMP", "CUDA driver",
                                                               None, "nobody")]
    out["declared_labels"] = [p.label for p in census.declared()]
    _proc(tmp_path, 40, {}, b"7f00 r-x libtensorflow_framework.so.2\n7f01 libtorch_cpu.so\n"
                            b"7f02 libjax.so libxla_extension.so jaxlib\n")
    libraries = census._libraries()
    out["libraries"] = [[label, lib.decode()] for label, lib, *_ in libraries]
    loaded = census.loaded(40, str(tmp_path))
    out["loaded"] = loaded
    out["loaded_first"] = list(census.loaded(40, str(tmp_path), first=list(loaded)[-1]))
    out["loaded_missing"] = census.loaded(41, str(tmp_path))
    _pin("census", out, update_golden)


def test_a_census_reads_the_real_proc_by_default(monkeypatch):
    pid = os.getpid()
    main = Path(f"/proc/{pid}/comm").read_text().strip()
    got = census.census([pid])
    assert got[UNNAMED][main] >= 1  # the main thread, by the process's own name
    opened: list[str] = []

    def empty(path: str, mode: str) -> io.BytesIO:
        opened.append(path)
        return io.BytesIO(b"")

    monkeypatch.setattr(census, "open", empty, raising=False)
    assert census.loaded(pid) == {} and opened == [f"/proc/{pid}/maps"]


# -- the watch while the run goes ------------------------------------------------------------

class _Sampler:
    """launcher's Sampler as the watch sees it (growth_watch.Sampling): rows, sample() and
    pace()."""

    interval = 1.0

    def __init__(self, clock: list[float], reading: dict[str, Any]) -> None:
        self.clock, self.reading = clock, reading
        self.rows: list[dict[str, Any]] = []
        self.paced: list[float] = []
        self.log: list[dict[str, Any]] = []  # every row, the watch drops the old ones
        self.graces: list[float] = []  # the SIGKILLs asked for after so many seconds

    def sample(self, extra: dict[str, Any] | None = None) -> None:
        self.rows.append({"t": self.clock[0], **self.reading, **(extra or {})})
        self.log.append(self.rows[-1])

    def pace(self, seconds: float) -> None:
        self.paced.append(seconds)


class _Profile:
    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values

    def get(self, key: str) -> Any:
        return self.values.get(key)

    def where(self, key: str) -> str:
        return f"p.yaml ({key})"


def _watch(monkeypatch, options: growth_watch.GrowthOptions, *, step: int = 7,
           stop: bool = True, limit: int = 45
           ) -> tuple[growth_watch.GrowthWatch, _Sampler, list[Any], list[str]]:
    clock = [100.0]
    monkeypatch.setattr(growth_watch.time, "monotonic", lambda: clock[0])
    said: list[str] = []
    signals: list[Any] = []
    watch = growth_watch.GrowthWatch(options, said.append)
    sampler = _Sampler(clock, {"threads": 3, "pids_max": limit})
    watch.attach(sampler, signals.append if stop else None, sampler.graces.append)
    for n in range(1, 9):
        sampler.reading["threads"] = 3 + step * (n - 1)
        # the same fold printed twice at once, a higher one within the debounce: one boundary
        watch.output("stdout", f"Fold {n}/8\nFold {n}/8\n".encode())
        watch.output("stderr", f"step {n}\nstep {n + 1}\n".encode())
        clock[0] += 5.0
        sampler.sample()
        clock[0] += 5.0
        if watch.stopped:
            break
    return watch, sampler, signals, said


def test_a_watched_leak_is_said_and_stopped_as_pinned(monkeypatch, update_golden):
    watch, sampler, signals, said = _watch(monkeypatch, growth_watch.GrowthOptions(stop=True))
    assert signals == [15] and sampler.graces == [10.0]  # the SIGKILL's grace: the caller's
    watch.output("stdout", b"RuntimeError: can't start new thread\n")  # signalled once only
    assert signals == [15] and sampler.graces == [10.0]
    out = {"said": said, "signals": signals, "result": watch.result(),
           "rows": sampler.rows, "log": sampler.log, "paced": sampler.paced,
           "book_start": watch.book.start,
           "constants": [growth_watch.STOP_GRACE_S, growth_watch.STOPPED_STATUS,
                         growth_watch.SPARE_CYCLES, growth_watch.MIN_BOUNDARY_S]}
    # not asked to stop: said, and said again only when the projection moves
    quiet, _, quiet_signals, quiet_said = _watch(
        monkeypatch, growth_watch.GrowthOptions(), step=5, stop=False)
    out["unstopped"] = [quiet_said, quiet_signals, quiet.result()]
    # over the limit already when first sure: the cycle about to start
    _, _, _, late = _watch(monkeypatch, growth_watch.GrowthOptions(stop=True), limit=16)
    out["late"] = late
    _, _, _, slow = _watch(monkeypatch, growth_watch.GrowthOptions(stop=True), step=1)
    out["slow"] = slow
    _pin("growth_watch_run", out, update_golden)


def test_the_watchs_windows_warnings_and_options_are_pinned(monkeypatch, update_golden):
    clock = [0.0]
    monkeypatch.setattr(growth_watch.time, "monotonic", lambda: clock[0])
    said: list[str] = []
    watch = growth_watch.GrowthWatch(growth_watch.GrowthOptions(window=2.5), said.append)
    sampler = _Sampler(clock, {"threads": 3})
    for t in (0.0, 1.0, 2.4, 2.5, 3.0, 5.1, 9.0):
        clock[0] = t
        watch.on_sample({"t": t})  # before attach: no sampler, nothing recorded
    watch.attach(sampler, None)
    for t in (10.0, 12.4, 12.5, 15.2, 20.0):
        clock[0] = t
        watch.on_sample({"t": t})
    out: dict[str, Any] = {"windows": [r.get("cycle") for r in sampler.log],
                           "next_window": watch.next_window, "real_unit": watch.real_unit}
    clock[0] = 30.0
    watch.output("stdout", b"epoch 1\n")
    watch.on_sample({"t": 40.0})
    out["after_line"] = [watch.real_unit, watch.next_window, len(sampler.rows)]
    numbered = growth_watch.GrowthWatch(
        growth_watch.GrowthOptions(pattern=re.compile(r"phase (\w+)")), said.append)
    numbered.output("stdout", b"phase one\nphase two\n")
    numbered.output("stdout", b"phase three\n")
    broken = growth_watch.GrowthWatch(growth_watch.GrowthOptions(), said.append)
    broken.attach(object(), None)
    broken.output("stdout", b"fold 1\n")
    broken.output("stdout", b"fold 2\n")
    broken.on_sample({"t": 1e6})
    out["said"] = said
    out["broken"] = [broken.broken, numbered.broken, numbered.told_unnumbered]
    options = []
    for values, kw in (({}, {}), ({"growth.cycle": r"round (\d+)", "growth.window": 5,
                                   "growth.stop": True}, {}),
                       ({"growth.cycle": "x"}, {"cycle": r"it (\d+)", "stop": True}),
                       ({}, {"stop": True})):
        o = growth_watch.GrowthOptions.of(_Profile(values), **kw)
        options.append([o.pattern.pattern if o.pattern else None, o.window, o.stop, o.stop_by])
    errors = []
    for values, kw in (({"growth.cycle": "("}, {}), ({}, {"cycle": ""}),
                       ({}, {"cycle": "(", "cycle_by": "--cycle-x"})):
        with pytest.raises(ValueError) as exc:
            growth_watch.GrowthOptions.of(_Profile(values), **kw)
        errors.append(str(exc.value))
    out["options"], out["errors"] = options, errors
    out["defaults"] = [growth_watch.GrowthOptions().window,
                       [f.name for f in dataclasses.fields(growth_watch.GrowthWatch)]]
    # the first window ends a window after the start, not at it
    first = growth_watch.GrowthWatch(growth_watch.GrowthOptions(window=2.5), said.append)
    first_rows = _Sampler(clock, {"threads": 3})
    first.attach(first_rows, None)
    for t in (1.0, 2.4, 2.6):
        clock[0] = t
        first.on_sample({"t": t})
    out["first_window"] = [r.get("cycle") for r in first_rows.log]
    # a bug met at a window's boundary ends the watch too
    at_window = growth_watch.GrowthWatch(growth_watch.GrowthOptions(window=1.0), said.append)
    at_window.attach(object(), None)
    at_window.on_sample({"t": 5.0})
    out["broken_at_window"] = [at_window.broken, said[-1]]
    _pin("growth_watch_options", out, update_golden)


def test_a_stop_decided_at_a_window_is_signalled_then(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(growth_watch.time, "monotonic", lambda: clock[0])
    said: list[str] = []
    signals: list[int] = []
    watch = growth_watch.GrowthWatch(growth_watch.GrowthOptions(window=1.0, stop=True),
                                     said.append)
    sampler = _Sampler(clock, {"threads": 3, "pids_max": 45})
    watch.attach(sampler, signals.append, sampler.graces.append)
    for t in range(1, 12):
        clock[0] = float(t)
        sampler.reading["threads"] = 3 + 7 * t
        watch.on_sample({"t": float(t)})
        if signals:
            break
    assert signals == [15] and sampler.graces == [10.0] and watch.stopped is not None
    assert said[-1] == (
        "growth: stopped at 5 s (--stop-before-limit): threads +7 a second would pass pids.max "
        "45 at ~7 s (2 windows' growth to spare); SIGTERM now, SIGKILL after 10 s")


def test_the_time_to_a_limit_counts_from_0_without_rows(monkeypatch):
    said: list[str] = []
    watch = growth_watch.GrowthWatch(growth_watch.GrowthOptions(), said.append)
    watch.attach(_Sampler([0.0], {}), None)
    watch.book = growth.CycleBook()
    cyc = watch.book.update(run_rows())
    watch.assess(cyc)
    # the open files reach theirs first: fold 11, 10 s a fold, counted from 0 (fold 10 at 90)
    assert said == ["growth: open files +25 per fold (folds 2-10): RLIMIT_NOFILE 256 reached in "
                    "fold ~11, in ~100 s"]


def test_a_said_projection_is_said_again_only_when_it_moves():
    watch = growth_watch.GrowthWatch(growth_watch.GrowthOptions(), lambda line: None)
    _, _, found = growth.cycle_trends(run_rows(), now=95.0)
    t = next(x for x in found if x.series == "threads")
    assert watch._moved(t)
    watch.shown = t
    moved = {k: watch._moved(growth.Trend(**{**t.__dict__, "reached": t.reached + k}))
             for k in (-3, -2, 2, 3)}
    assert moved == {-3: True, -2: False, 2: False, 3: True}
    far = growth.Trend(**{**t.__dict__, "last": t.last - 40})
    watch.shown = far
    # about 50 cycles ahead: more than 10% of them to move
    assert [watch._moved(growth.Trend(**{**far.__dict__, "reached": t.reached + k}))
            for k in (5, 6)] == [False, True]
    watch.shown = t
    assert watch._moved(growth.Trend(**{**t.__dict__, "limit": 99.0}))
    other = next(x for x in found if x.series == "files")
    assert watch._moved(growth.Trend(**{**other.__dict__, "limit": t.limit}))
    rss = next(x for x in found if x.series == "rss_bytes")
    memory = next(x for x in found if x.series == "memory_bytes")
    watch.shown = memory
    # the same limit key (the memory limit): a move of the cycle only
    assert not watch._moved(growth.Trend(**{**rss.__dict__, "limit": memory.limit,
                                            "reached": memory.reached}))


def test_a_trend_recorded_before_of_existed_reads_as_the_floors():
    """summary.json's trends are read back with Trend(**t) (the report, --write-profile): one
    written before `of` was recorded grows in what each cycle keeps."""
    _, _, found = growth.cycle_trends(run_rows(), now=95.0)
    old = {k: v for k, v in found[0].to_json().items() if k != "of"}
    t = growth.Trend(**{**old, "pool_names": tuple(old["pool_names"])})
    assert t.of == "floor" and growth_words.step(t) == "+7 per fold"


def test_a_series_that_grew_past_the_last_sample_meets_its_limit_at_the_workloads_end():
    """`Too many open files` a second after the last sample, the files growing 900 a second:
    the 94% sampled plus the second's growth is the limit met (the supervisor's clock)."""
    _, cyc, found = growth.cycle_trends(run_rows(), now=95.0)
    last = cyc[-1]
    limits = {**last.limits, "files": 16384}
    peak = {**last.peak, "files": 15400.0}
    end = [*cyc[:-1], growth.Cycle(last.n, last.t0, None, last.floor, peak, None, limits, {})]
    files = growth.Trend(**{**next(t for t in found).__dict__, "series": "files",
                            "grows": True, "reached": None, "per_minute": 900.0 * 60})
    assert growth_verdict.words_reason({"files": "x"}, end, [files]) == [None, None]
    assert growth_verdict.words_reason({"files": "x"}, end, [files], None, 0.1) == [None, None]
    assert growth_verdict.words_reason({"files": "x"}, end, [files], None, 1.0) == ["files",
                                                                                     None]
