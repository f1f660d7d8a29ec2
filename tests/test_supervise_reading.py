"""launcher/supervise/reading.py, driven directly: the watch's reading of the workload's output
within its CPU budget (each stream's half of the burst and the share, a read over it skipped
and counted), what a skipped read still gives (its cycle lines, its tail for the end's failure
words), the record it leaves, and the reading of a real GrowthWatch (for_watch). The clock and
the CPU time are the Reading's own parameters: here they are ours, so no figure depends on how
busy the host is (tests/test_scan_budget.py runs the budget against real output)."""

from __future__ import annotations

import random
import re
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from launcher.supervise.reading import Account, Reading, for_watch, found_lines, printed_words
from launcher.telemetry.growth_watch import GrowthOptions, GrowthWatch

# the module's figures, as documented (its constants may not be read here: a test that read
# them would follow any change of them)
SHARE = 0.02  # of a core, over the run
BURST = 0.05  # CPU seconds before the share applies
TAIL = 256 << 10  # bytes of each stream's skipped output read at the end
FIRST_WORDS = 4 << 20  # skipped bytes searched for any unit's word until one is known


class Hung(Exception):
    """A call went on past its CPU deadline (a loop that never ends)."""


@pytest.fixture(autouse=True)
def cpu_deadline() -> Iterator[None]:
    """Each test within 3 CPU seconds of this process (a busy host does not count): a loop
    that never ends fails the test instead of holding the run."""
    def expired(_sig: int, _frame: object) -> None:
        raise Hung("past the CPU deadline")

    old = signal.signal(signal.SIGVTALRM, expired)
    signal.setitimer(signal.ITIMER_VIRTUAL, 3.0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, old)


class Host:
    """The clock and the CPU time a Reading is given, and what it told its callbacks, in
    order. A read costs `read_cost` CPU seconds of the reading's own and `cycle_cost` of a
    cycle's work (`aside`); a skip costs `skip_cost`, the end's reading `late_cost`."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now
        self.cpu_s = 10.0
        self.aside_s = 1.0
        self.read_cost = 0.01
        self.cycle_cost = 0.0
        self.skip_cost = 0.0
        self.late_cost = 0.0
        self.calls: list[tuple[Any, ...]] = []

    def read(self, stream: str, data: bytes, came: float | None) -> None:
        self.calls.append(("read", stream, data, came))
        self.cpu_s += self.read_cost + self.cycle_cost
        self.aside_s += self.cycle_cost

    def skip(self, stream: str, data: bytes, came: float | None) -> None:
        self.calls.append(("skip", stream, data, came))
        self.cpu_s += self.skip_cost

    def late(self, stream: str, data: bytes) -> None:
        self.calls.append(("late", stream, data))
        self.cpu_s += self.late_cost

    def reading(self, **kw: Any) -> Reading:
        return Reading(self.read, self.skip, self.late, clock=lambda: self.now,
                       cpu=lambda: self.cpu_s, aside=lambda: self.aside_s, **kw)

    def kinds(self) -> list[str]:
        return [call[0] for call in self.calls]

    def of(self, kind: str) -> list[tuple[Any, ...]]:
        return [call[1:] for call in self.calls if call[0] == kind]


def test_a_stream_is_read_within_half_the_burst_then_skipped_until_the_share_allows():
    host = Host()
    r = host.reading()  # started at 100.0
    for n in range(4):  # a stream's half of the burst: 0.025 s, each read 0.01
        r.output("stdout", b"line %d\n" % n, came=99.0 + n)
    assert host.kinds() == ["read", "read", "read", "skip"]
    assert host.of("read")[0] == ("stdout", b"line 0\n", 99.0)
    assert host.of("skip") == [("stdout", b"line 3\n", 102.0)]
    host.now = 100.4  # (0.05 + 0.02 * 0.4) / 2 = 0.029: still short of the 0.03 spent
    r.output("stdout", b"early\n")
    host.now = 100.6  # 0.031: a read again
    r.output("stdout", b"again\n")
    assert host.kinds()[4:] == ["skip", "read"]
    assert r.record() == {"read_bytes": 3 * 7 + 6, "skipped_bytes": 7 + 6, "skipped_reads": 2,
                          "found_lines": 0, "cpu_s": 0.04, "share": SHARE}


def test_the_credit_is_the_burst_and_the_share_since_the_start_halved_less_the_spent():
    host = Host(now=100.0)
    r = host.reading()
    assert r.started == 100.0  # the clock's, at the start
    host.now = 110.0
    a = Account(spent=0.03)
    assert r.credit(a) == pytest.approx((BURST + SHARE * 10.0) / 2 - 0.03)
    given = host.reading(started=0.0)  # a start given stands, 0 included
    assert given.started == 0.0
    assert given.credit(Account()) == pytest.approx((BURST + SHARE * 110.0) / 2)
    own = host.reading(share=0.5, burst=1.0)  # started at 110.0
    host.now = 120.0
    assert own.credit(Account(spent=0.25)) == pytest.approx((1.0 + 0.5 * 10.0) / 2 - 0.25)
    assert own.record()["share"] == 0.5


def test_no_credit_left_at_all_is_still_a_read():
    host = Host()
    host.read_cost = 0.5  # a binary fraction: the credit comes to 0.0 exactly
    r = host.reading(share=0.25, burst=1.0)  # a stream's half: 0.5
    r.output("stdout", b"one\n")
    assert r.credit(r.accounts["stdout"]) == 0.0
    r.output("stdout", b"two\n")  # the credit is 0, not a debt: read
    r.output("stdout", b"three\n")
    assert host.kinds() == ["read", "read", "skip"]


def test_each_stream_has_its_own_half_so_a_quiet_one_is_read_beside_a_loud_one():
    host = Host()
    r = host.reading()
    for n in range(5):
        r.output("stdout", b"noise %d\n" % n)
    r.output("stderr", b"Traceback (most recent call last):\n")
    assert [c[1] for c in host.calls if c[0] == "read"] == ["stdout"] * 3 + ["stderr"]
    assert set(r.accounts) == {"stdout", "stderr"}
    assert r.accounts["stdout"].skipped_reads == 2 and r.accounts["stderr"].skipped_reads == 0
    assert r.accounts["stderr"].read_bytes == 35 and r.accounts["stdout"].read_bytes == 24


def test_a_cycles_own_work_is_not_the_readings():
    host = Host()
    host.read_cost, host.cycle_cost = 0.005, 0.5  # a boundary's sample and fit: aside
    r = host.reading()
    for n in range(4):
        r.output("stdout", b"Epoch %d/9\n" % n)
    assert host.kinds() == ["read"] * 4  # 0.02 of the reading's own: within its 0.025
    assert r.accounts["stdout"].spent == pytest.approx(0.02)
    assert r.record()["cpu_s"] == 0.02


def test_the_spent_seconds_are_kept_to_four_places_in_the_record():
    host = Host()
    host.read_cost = 0.0123456
    r = host.reading()
    r.output("stdout", b"x\n")
    assert r.record() == {"read_bytes": 2, "skipped_bytes": 0, "skipped_reads": 0,
                          "found_lines": 0, "cpu_s": 0.0123, "share": SHARE}
    assert Reading(host.read, host.skip, host.late).record() == {
        "read_bytes": 0, "skipped_bytes": 0, "skipped_reads": 0, "found_lines": 0,
        "cpu_s": 0, "share": SHARE}


def spent(host: Host, r: Reading, stream: str = "stdout") -> None:
    """The stream's credit spent: its next reads are skipped."""
    host.read_cost = 1.0
    r.output(stream, b"spent\n")
    host.read_cost = 0.0
    assert r.credit(r.accounts[stream]) < 0


def test_a_skipped_read_still_gives_the_last_line_of_each_cycles_word():
    host = Host()
    r = host.reading(words=lambda: [b"Epoch", b"step"], first_words=(b"epoch",))
    spent(host, r)
    host.calls.clear()
    data = b"Epoch 1/3\nstep 10\nepoch 9 (not a known word now)\nEpoch 2/3\nloss 0.1\nEpo"
    r.output("stdout", data, came=5.0)
    assert host.calls == [("skip", "stdout", data, 5.0),
                          ("read", "stdout:found", b"Epoch 2/3\nstep 10\n", 5.0)]
    assert r.found_lines == 2
    rec = r.record()
    assert (rec["found_lines"], rec["skipped_reads"], rec["skipped_bytes"]) == (
        2, 1, len(data))
    r.output("stdout", b"nothing of a cycle here\n")  # none found: nothing read
    assert host.kinds()[-1] == "skip" and r.found_lines == 2


def test_a_skipped_reads_first_line_counts_only_where_the_last_read_ended_one():
    host = Host()
    r = host.reading(words=lambda: [b"Epoch"])
    spent(host, r)  # its read ended a line: the next begins one
    r.output("stdout", b"Epoch 4/9\nloss 1\n")
    assert host.of("read")[-1] == ("stdout:found", b"Epoch 4/9\n", None)
    r.output("stdout", b"Epoch 5/9 half a l")  # no line's end: the next read begins within
    r.output("stdout", b"ine, Epoch 6/9 inside\n")
    assert host.of("read")[-1] == ("stdout:found", b"Epoch 4/9\n", None)  # nothing new
    r.output("stdout", b"Epoch 7/9\n")  # after a line's end again
    assert host.of("read")[-1] == ("stdout:found", b"Epoch 7/9\n", None)
    fresh = Host()
    first = fresh.reading(words=lambda: [b"Epoch"], burst=0.0, share=0.0)
    fresh.read_cost = 0.0
    first.accounts["stdout"] = Account(spent=1.0)  # no read yet: it begins the stream
    first.output("stdout", b"Epoch 1/9\n")
    assert fresh.of("read") == [("stdout:found", b"Epoch 1/9\n", None)]


def test_the_first_words_are_looked_for_in_the_first_4_mib_skipped_until_a_word_is_known():
    host = Host()
    known: list[bytes] = []
    r = host.reading(words=lambda: known, first_words=(b"epoch", b"Epoch"))
    spent(host, r)
    head = b"x" * (FIRST_WORDS - 14) + b"\nepoch 1 of 9\n"
    assert len(head) == FIRST_WORDS
    r.output("stdout", head)  # 4 MiB skipped: the first words still apply
    assert host.of("read")[-1] == ("stdout:found", b"epoch 1 of 9\n", None)
    r.output("stdout", b"Epoch 2 of 9\n")  # past them: no longer
    assert host.of("read")[-1] == ("stdout:found", b"epoch 1 of 9\n", None)
    assert r.found_lines == 1
    known.append(b"Epoch")  # a unit's own word: looked for however far
    r.output("stdout", b"Epoch 3 of 9\nepoch 4 of 9\n")
    assert host.of("read")[-1] == ("stdout:found", b"Epoch 3 of 9\n", None)
    assert r.found_lines == 2


def test_the_end_reads_each_streams_last_256_kib_skipped_from_a_whole_line():
    host = Host()
    r = host.reading()
    spent(host, r)
    spent(host, r, "stderr")
    lines = [b"%063d\n" % n for n in range(10000)]  # 64 bytes each
    for at in range(0, len(lines), 1000):
        r.output("stdout", b"".join(lines[at:at + 1000]))
    r.output("stderr", b"half a line\nMemoryError")
    host.late_cost = 0.125
    before = r.record()["cpu_s"]
    r.close()
    late = host.of("late")
    assert late[0] == ("stdout", b"".join(lines[-(TAIL // 64) + 1:]) + b"\n")
    assert late[1] == ("stderr", b"MemoryError\n")
    assert len(late) == 2
    assert r.record()["cpu_s"] == before + 0.25  # the end's reading is the reading's too
    r.close()  # read once: nothing left
    assert len(host.of("late")) == 2


def test_a_tail_without_a_line_end_is_read_whole_and_a_stream_never_skipped_is_not():
    host = Host()
    r = host.reading()
    r.output("stderr", b"read in time\n")
    spent(host, r)
    r.output("stdout", b"Killed")
    r.close()
    assert host.of("late") == [("stdout", b"Killed\n")]


def test_the_tail_keeps_whole_reads_while_they_are_needed_for_256_kib():
    host = Host()
    r = host.reading()
    spent(host, r)
    small = b"x" * 9 + b"\n"
    big = b"keep\n" + b"y" * (TAIL - 6)  # with `small`'s last byte: 256 KiB exactly
    r.output("stdout", small)
    r.output("stdout", big)
    assert r.accounts["stdout"].tail == [small, big]  # `big` alone is short of the tail
    r.close()
    assert host.of("late")[-1] == ("stdout", big + b"\n")
    r.output("stdout", small)  # after the end, as from the start
    r.output("stdout", big)
    assert r.accounts["stdout"].tail_bytes == len(small) + len(big)
    r.output("stdout", b"\n")  # now `big` and this hold the whole tail: `small` goes
    assert r.accounts["stdout"].tail == [big, b"\n"]
    assert r.accounts["stdout"].tail_bytes == TAIL
    r.close()
    assert host.of("late")[-1] == ("stdout", big[5:] + b"\n\n")


@pytest.mark.parametrize(("data", "words", "whole", "want"), [
    (b"Epoch 1/3\nloss 2\nEpoch 2/3\nloss 1\n", [b"Epoch"], True, [b"Epoch 2/3\n"]),
    (b"Epoch 1/3\n", [b"Epoch"], True, [b"Epoch 1/3\n"]),  # the word at the very start
    (b"Epoch 1/3\n", [b"Epoch"], False, []),  # ... of a line the read cut
    (b"\nEpoch 1/3\n", [b"Epoch"], False, [b"Epoch 1/3\n"]),  # a line's end at the start
    (b"\rEpoch 1/3\n", [b"Epoch"], False, [b"Epoch 1/3\n"]),
    (b"x\rEpoch 2/3 [=====>   ]\n", [b"Epoch"], True, [b"Epoch 2/3 [=====>   ]\n"]),
    (b"a\nEpoch 1/3\nEpoch 2/3 cut", [b"Epoch"], True, [b"Epoch 1/3\n"]),
    (b"loss at Epoch\nEpoch 2", [b"Epoch"], True, [b"loss at Epoch\n"]),
    (b"step 1\nEpoch 1\nstep 2\n", [b"Epoch", b"step"], True, [b"Epoch 1\n", b"step 2\n"]),
    (b"no words\n", [b"Epoch"], True, []),
    (b"Epoch 1", [b"Epoch"], True, []),
    (b"", [b"Epoch"], True, []),
    (b"E\nE", [b"E"], True, [b"E\n"]),
    (b"\nE", [b"E"], True, []),
    (b"E", [b"E"], False, []),
    (b"\n", [b"\n"], True, [b"\n"]),  # a word that is a line's end: the line it ends
    (b"\n\n", [b"\n"], False, [b"\n"]),
])
def test_found_lines_the_last_whole_line_of_each_word(data: bytes, words: list[bytes],
                                                      whole: bool, want: list[bytes]) -> None:
    assert found_lines(data, words, whole=whole) == want


def test_found_lines_takes_the_data_as_beginning_a_line_unless_told():
    assert found_lines(b"Epoch 1\n", [b"Epoch"]) == [b"Epoch 1\n"]


def reference(data: bytes, word: bytes, whole: bool) -> list[bytes]:
    """found_lines' rule, read plainly (a word without a line's end): of the word's places,
    the last whose line ends (a newline after it) and begins (a newline or a carriage
    return before it, or the data's start where it begins a line)."""
    for p in sorted((m.start() for m in re.finditer(b"(?=" + re.escape(word) + b")", data)),
                    reverse=True):
        stop = data.find(b"\n", p)
        start = max(data.rfind(b"\n", 0, p), data.rfind(b"\r", 0, p))
        if stop >= 0 and (start >= 0 or whole):
            return [data[start + 1:stop + 1]]
    return []


def test_found_lines_agrees_with_a_plain_reading_of_random_output():
    rng = random.Random(47)
    for _ in range(3000):
        data = bytes(rng.choice(b"ab\n\r") for _ in range(rng.randrange(12)))
        word = bytes(rng.choice(b"ab") for _ in range(rng.randrange(1, 3)))
        whole = rng.random() < 0.5
        assert found_lines(data, [word], whole=whole) == reference(data, word, whole), (
            data, word, whole)


def test_printed_words_are_the_units_as_their_first_line_printed_them():
    examples = {"epoch": "Epoch 2/10 loss 0.3", "step": "global STEP 7",
                "batch": "it 5 done", "iter": ""}
    units = ("epoch", "step", "batch", "iter", "fold")
    assert printed_words(examples, units) == (b"Epoch", b"STEP")
    assert printed_words({}, units) == ()


def watch() -> tuple[GrowthWatch, list[str]]:
    said: list[str] = []
    return GrowthWatch(GrowthOptions(), said.append), said


def test_a_watchs_reading_reads_its_cycles_and_learns_their_words():
    w, _ = watch()
    r = for_watch(w)
    assert b"epoch" in r.first_words and b"Epoch" in r.first_words
    assert b"step" in r.first_words and b"Step" in r.first_words
    assert tuple(r.words()) == ()  # none learned yet
    r.output("stdout", b"Epoch 1/3\n")
    assert "epoch" in w.marks.example  # the watch read it
    assert tuple(r.words()) == (b"Epoch",)
    assert tuple(r.words()) == (b"Epoch",)
    w.cycle_cpu = 2.5
    assert r.aside() == 2.5  # the cycles' CPU, not the reading's


def test_a_watchs_cycle_words_are_made_once_for_each_new_example():
    w, _ = watch()
    r = for_watch(w)
    r.output("stdout", b"Epoch 1/3\n")  # asked for the first time after one came
    words = r.words()
    assert tuple(words) == (b"Epoch",)
    assert r.words() is words  # the same, until another unit's example comes
    r.output("stdout", b"step 10\n")
    assert tuple(r.words()) == (b"Epoch", b"step")


def test_a_watchs_reading_skips_into_its_lines_and_reads_the_tail_for_failure_words():
    w, _ = watch()
    r = for_watch(w)
    r.accounts["stderr"] = Account(spent=10.0)  # no credit left
    r.output("stderr", b"Traceback (most recent call last):\n  File \"x\"\nMemory")
    assert w.lines.partial.get("stderr") == b"Memory"  # the cut kept, as a skip keeps it
    r.output("stderr", b"Error\n")
    r.close()
    assert w.failure.found.get("memory") == "MemoryError"
    assert r.record()["skipped_reads"] == 2
