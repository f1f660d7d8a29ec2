"""The watch reads output of any kind within its budget (issue 44): random bytes and unique log
lines pass through `launcher run` whole, the run record says what the watch skipped, and a
cycle line among the noise is still counted, a failure word in it still named. No timing
here (benchmarks/output.py measures it): the budget is driven by a clock of our own."""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
from pathlib import Path

from launcher.supervise.reading import TAIL, Reading, found_lines, printed_words
from launcher.telemetry import cycles, failures, growth_watch
from launcher.telemetry.scan import MAX_DRAWN, MAX_SHAPES, NEEDLES, Lines
from tests.conftest import need
from tests.docker_helpers import BASE, docker_missing

FAILURE = b"OSError: [Errno 24] Too many open files"
WRITER = """import sys, time
data = memoryview(open(sys.argv[1], "rb").read())
for at in range(0, len(data), 8192):  # as print's buffer writes
    sys.stdout.buffer.write(data[at:at + 8192])
    if at % (1 << 19) == 0:  # ~10 MB/s: a flood that lasts the seconds the samples need
        sys.stdout.buffer.flush()
        time.sleep(0.05)
"""


def unique_lines(mb: int, *, epoch_every: int = 20000, failure: bool = True) -> bytes:
    """Lines of unique ids, an `Epoch N/M` line every `epoch_every`, the failure's words
    near the end (some noise after them, as a dying run's last lines)."""
    r = random.Random(44)
    out, size, n = [], 0, 0
    while size < mb << 20:
        line = b"req %s user=%s status=ok n=%d\n" % (
            r.randbytes(8).hex().encode(), r.randbytes(4).hex().encode(), n)
        if n % epoch_every == epoch_every - 1:
            line += b"Epoch %d/%d loss 0.5\n" % (n // epoch_every + 1, 1000)
        out.append(line)
        size, n = size + len(line), n + 1
    if failure:
        out.insert(len(out) - 500, FAILURE + b"\n")
    return b"".join(out)


def _run(tmp_path: Path, data: bytes, *runtime: str) -> tuple[bytes, dict]:  # type: ignore[type-arg]
    (tmp_path / "out.bin").write_bytes(data)
    (tmp_path / "w.py").write_text(WRITER)
    runs = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, "-m", "launcher", "run", *(runtime or ("--runtime", "native")), "--",
         "python3", "w.py", str(tmp_path / "out.bin")], cwd=tmp_path, capture_output=True,
        timeout=300, env={**os.environ, "LAUNCHER_RUNS_DIR": str(runs)})
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    (folder,) = runs.iterdir()
    return proc.stdout, json.loads((folder / "summary.json").read_text())


def _cycles(summary: dict) -> list[int]:  # type: ignore[type-arg]
    return [c["n"] for c in summary["growth"].get("cycles") or []]


def test_random_bytes_pass_whole_and_the_skip_is_recorded(tmp_path):
    data = random.Random(7).randbytes(20 << 20)
    out, summary = _run(tmp_path, data)
    assert hashlib.sha256(out).hexdigest() == hashlib.sha256(data).hexdigest()
    read = summary["growth"]["output"]
    assert read["read_bytes"] + read["skipped_bytes"] == len(data)
    assert read["skipped_bytes"] > 0 and read["skipped_reads"] > 0


def test_unique_lines_pass_whole_their_cycles_counted_and_the_failure_named(tmp_path):
    data = unique_lines(20)
    out, summary = _run(tmp_path, data)
    assert hashlib.sha256(out).hexdigest() == hashlib.sha256(data).hexdigest()
    growth = summary["growth"]
    assert growth["output"]["skipped_bytes"] > 0  # over the budget: skipped, and said
    assert growth["output"]["found_lines"] > 0  # the cycles' word found in what was skipped
    assert growth["unit"] == "epoch" and len(_cycles(summary)) >= 3
    assert growth["failure_text"] == {"files": FAILURE.decode()}


def test_unique_lines_through_docker(tmp_path):
    need("Docker and the base image", docker_missing())
    data = unique_lines(10)
    out, summary = _run(tmp_path, data, "--runtime", "docker", "--image", BASE)
    assert hashlib.sha256(out).hexdigest() == hashlib.sha256(data).hexdigest()
    growth = summary["growth"]
    assert growth["output"]["skipped_bytes"] > 0
    assert growth["unit"] == "epoch" and growth["failure_text"] == {"files": FAILURE.decode()}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _reading(cpu_per_read: float, log: list[tuple[str, bytes]]) -> tuple[Reading, Clock]:
    clock, cpu = Clock(), Clock()

    def read(stream: str, data: bytes, came: float | None) -> None:
        log.append((stream, data))
        cpu.now += cpu_per_read

    late: list[tuple[str, bytes]] = []
    r = Reading(read, lambda s, d, c: None, lambda s, d: late.append((s, d)),
                lambda: (b"Epoch",), share=0.02, burst=0.02, clock=clock, cpu=cpu)
    r.late_log = late  # type: ignore[attr-defined]
    return r, clock


def test_the_budget_skips_what_it_cannot_pay_for_and_says_so():
    log: list[tuple[str, bytes]] = []
    r, clock = _reading(0.01, log)  # each read costs 10 ms: the burst pays for two a stream
    chunk = b"noise\n" * 1000
    for _ in range(10):
        r.output("stdout", chunk)
    assert [s for s, _ in log] == ["stdout", "stdout"]
    assert r.record()["skipped_bytes"] == 8 * len(chunk)
    assert r.record()["skipped_reads"] == 8
    clock.now = 10.0  # 10 s later: 0.1 s a stream earned, ten reads' worth
    r.output("stdout", chunk)
    assert len(log) == 3
    r.output("stderr", b"Traceback\n")  # a quiet stream has its own half
    assert log[-1] == ("stderr", b"Traceback\n")


def test_a_skipped_read_still_gives_its_cycle_lines_and_its_tail_at_the_end():
    log: list[tuple[str, bytes]] = []
    r, _ = _reading(1.0, log)  # the first read spends it all
    r.output("stdout", b"warm\n")
    r.output("stdout", b"x" * 100 + b"\nEpoch 2/9 loss 1\n" + b"y\n" * 10 + b"Epoch 3/9\nz\n")
    assert log[-1] == ("stdout:found", b"Epoch 3/9\n")  # the last: the latest cycle
    for _ in range(40):
        r.output("stdout", b"n\n" * 5000)
    r.output("stdout", FAILURE + b"\n" + b"after\n" * 10)
    r.close()
    (stream, tail), = r.late_log  # type: ignore[attr-defined]
    assert stream == "stdout" and len(tail) <= TAIL + 1 and FAILURE in tail


def test_a_budget_spent_before_the_first_cycle_line_still_finds_one():
    """On a busy host the budget can run out before the first `Epoch` line is read whole:
    no word is known from it yet, so the familiar units' words are looked for (in the first
    FIRST_WORDS_BYTES skipped), and the cycle line is read all the same."""
    from launcher.supervise import reading

    log: list[tuple[str, bytes]] = []
    clock, cpu = Clock(), Clock()

    def read(stream: str, data: bytes, came: float | None) -> None:
        log.append((stream, data))
        cpu.now += 1.0

    watch = growth_watch.GrowthWatch(growth_watch.GrowthOptions(), [].append)
    first = reading.for_watch(watch).first_words
    assert b"Epoch" in first and b"step" in first
    r = Reading(read, lambda s, d, c: None, lambda s, d: None, tuple, first_words=first,
                clock=clock, cpu=cpu)
    r.output("stdout", b"warm\n")  # spends it all
    r.output("stdout", b"id 1\n" * 10 + b"Epoch 1/9 loss 1\n" + b"id 2\n")
    assert log[-1] == ("stdout:found", b"Epoch 1/9 loss 1\n")
    r.output("stdout", b"x" * reading.FIRST_WORDS_BYTES)  # past the first bytes: no more
    r.output("stdout", b"Epoch 2/9 loss 1\n")
    assert log[-1] == ("stdout:found", b"Epoch 1/9 loss 1\n")


def test_found_lines_reads_no_line_cut_by_the_reads_edge():
    assert found_lines(b"poch 3/9\nEpoch 4/9\nx", (b"Epoch",), whole=False) == [b"Epoch 4/9\n"]
    assert found_lines(b"Epoch 3/9\nEpoch 4", (b"Epoch",)) == [b"Epoch 3/9\n"]
    assert found_lines(b"poch 3/9\nx\nEpoch 4", (b"Epoch",), whole=False) == []
    assert printed_words({"epoch": "Epoch 1/10", "count": "12"}, cycles.UNITS) == (b"Epoch",)


def test_the_needles_are_the_words_cycles_and_failures_read():
    for unit in cycles.UNITS:
        assert any(n in unit.encode() for n in NEEDLES), unit
    for hints in failures._HINTS.values():
        assert set(hints) <= set(NEEDLES)


def test_a_crowded_chunk_keeps_its_words_and_its_repeating_shapes():
    lines = Lines()
    r = random.Random(1)

    def noise(k: int) -> bytes:
        return b"".join(b"id %s\n" % r.randbytes(6).hex().encode() for _ in range(k))

    lines.feed("stdout", noise(500) + b"Process 0, iteration 1: 4 open FDs\n" + noise(500))
    chunk, _ = lines.feed("stdout", noise(300) + b"Process 0, iteration 2: 8 open FDs\n"
                          + noise(300) + b"can't start new thread\n" + noise(300))
    assert chunk is not None and chunk.crowded > MAX_SHAPES
    assert len(chunk.counts) <= MAX_SHAPES
    assert {chunk.line(k) for k in chunk.counts} >= {
        b"Process 0, iteration 2: 8 open FDs", b"can't start new thread"}
    watch = failures.FailureText()
    watch.scan(chunk)
    assert "thread" in watch.found


def test_a_bar_redrawn_at_full_speed_gives_its_first_and_last_redraws():
    lines = Lines()
    _, drawn = lines.feed("stderr", b"".join(b"\rEpoch 1: %d%%" % i for i in range(1000))
                          + b"\rEpoch 2: 0%")
    assert len(drawn) == MAX_DRAWN and drawn[-1] == b"Epoch 1: 999%"


def test_a_skipped_read_leaves_the_next_one_at_a_whole_line():
    lines = Lines()
    lines.feed("stdout", b"half a li")
    lines.skip("stdout", b"ne\nmore\nepoch 4/")
    chunk, _ = lines.feed("stdout", b"9\nepoch 5/9\n")
    assert chunk is not None and chunk.text == b"epoch 4/9\nepoch 5/9\n"


def test_a_line_ended_in_a_later_read_is_of_the_moment_its_first_bytes_came():
    """`python -u` writes a line and its newline apart: the line's chunk (the head) carries
    the first read's moment, the lines after it the later read's, and a cycle word in each
    is a boundary of its own part's moment."""
    from launcher.telemetry.cycles import CycleMarks

    lines, marks = Lines(), CycleMarks()
    assert lines.feed("stdout", b"cycle 1/5", 10.0) == (None, [])
    assert lines.began == {"stdout": 10.0}
    chunk, drawn = lines.feed("stdout", b"\ncycle 2/5\ncycle 3", 12.0)
    assert chunk is not None and chunk.head is not None
    assert (chunk.head.came, chunk.came) == (10.0, 12.0)
    assert [(b.n, b.came) for b in marks.scan(chunk, drawn)] == [(1, 10.0), (2, 12.0)]
    assert lines.began == {"stdout": 12.0}  # `cycle 3` began in the second read
    lines.feed("stdout", b"/5", 13.0)  # more of the same line: it began at 12
    chunk, _ = lines.feed("stdout", b"\n", 14.0)
    assert chunk is not None and chunk.came == 12.0 and lines.began == {}
    lines.skip("stdout", b"x\ny", 15.0)  # a skipped read's unended rest began then
    assert lines.began == {"stdout": 15.0}


def test_a_user_pattern_marks_the_head_line_at_its_own_moment():
    from launcher.telemetry.cycles import CycleMarks, compile_pattern

    lines, marks = Lines(), CycleMarks(compile_pattern(r"step (\d+)"))
    lines.feed("stdout", b"step 1", 1.0)
    chunk, drawn = lines.feed("stdout", b"\nstep 2\n", 2.0)
    assert [(b.n, b.came) for b in marks.scan(chunk, drawn)] == [(1, 1.0), (2, 2.0)]
