"""launcher/units.py at its edges: each spelling of each unit, the boundaries at equality, a
plain digit string, and `0k` stacks (tests that kill the mutants scripts/mutation.py found)."""

from __future__ import annotations

import pytest

from launcher.units import format_rlimit, format_size, kib, mib_up, parse_size, term


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1", 1), ("1048576", 1048576), ("1b", 1), ("512B", 512),
     ("1k", 1024), ("1KiB", 1024), ("1m", 1 << 20), ("1MiB", 1 << 20),
     ("1g", 1 << 30), ("1GiB", 1 << 30), ("1t", 1 << 40), ("1TiB", 1 << 40),
     ("0.5k", 512), (" 2 kib ", 2048)],
)
def test_every_unit_in_both_spellings_and_a_plain_digit_string(text, expected):
    assert parse_size(text) == expected


def test_the_smallest_sizes_are_one_byte():
    assert parse_size(1) == 1
    assert parse_size("1") == 1
    with pytest.raises(ValueError, match="^must be positive$"):
        parse_size("0.4")  # floors to 0 bytes


@pytest.mark.parametrize(("unit", "power"), [("KB", 3), ("MB", 6), ("GB", 9), ("TB", 12)])
def test_each_decimal_unit_names_its_power_of_ten(unit, power):
    with pytest.raises(ValueError, match=rf"^{unit} is ambiguous \(10\^{power} bytes "
                                         rf"elsewhere\); sizes here are binary: write "
                                         rf"2{unit[0]}iB$"):
        parse_size(f"2{unit}")


@pytest.mark.parametrize(
    ("n", "text"),
    [(1023, "1023B"), (1024, "1KiB"), ((1 << 20) - 1, "1024KiB"), (1 << 20, "1MiB"),
     (8 << 20, "8MiB"), (1 << 30, "1GiB"), (1 << 40, "1TiB"), (3 << 40, "3TiB"),
     (int(1.5 * (1 << 30)), "1.5GiB"), (int(100.4 * (1 << 20)), "100MiB"),
     (int(99.5 * (1 << 20)), "99.5MiB")],
)
def test_format_size_at_each_threshold_and_rounding(n, text):
    assert format_size(n) == text


def test_mib_up_rounds_up_to_whole_mib():
    assert mib_up(1) == "1MiB"
    assert mib_up(1 << 20) == "1MiB"
    assert mib_up((1 << 20) + 1) == "2MiB"
    assert mib_up(3 << 20) == "3MiB"


def test_term_signs_zero_as_plus():
    assert term(0, "bytes") == "+ 0 bytes"
    assert term(0.4, "bytes") == "+ 0 bytes"
    assert term(-1346, "bytes") == "- 1,346 bytes"
    assert term(1346, "bytes") == "+ 1,346 bytes"


def test_kib_never_writes_a_0k_stack():
    assert kib(100) == "1k"
    assert kib(1023) == "1k"
    assert kib(2048) == "2k"
    assert kib(4095) == "3k"


def test_format_rlimit_unlimited_sizes_and_counts():
    assert format_rlimit("nproc", -1) == "unlimited"
    assert format_rlimit("nproc", 0) == "0"
    assert format_rlimit("nofile", 1024) == "1024"
    assert format_rlimit("stack", 8 << 20) == "8MiB"
    assert format_rlimit("memlock", 65536) == "64KiB"


# The words of each refusal of a size (the profile's errors quote them)


@pytest.mark.parametrize(("value", "why"), [
    (True, "expected a size such as 512k or 8MiB"), (None, "expected a size such as 512k or 8MiB"),
    ("lots", "expected a size such as 512k or 8MiB"), (0, "must be positive"),
    (1.5, "a size in bytes must be whole; add a unit such as 7.7GiB")])
def test_each_refusal_of_a_size_says_why_in_its_own_words(value, why):
    with pytest.raises(ValueError) as err:
        parse_size(value)
    assert str(err.value) == why
