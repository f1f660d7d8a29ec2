import pytest

from launcher.units import format_size, kib, parse_size


@pytest.mark.parametrize(
    ("text", "expected"),
    [("512k", 524288), ("8MiB", 8388608), ("1GiB", 1 << 30), ("300m", 314572800),
     ("7.7GiB", int(7.7 * (1 << 30))), (1048576, 1048576), ("64 MiB", 64 << 20), ("2T", 2 << 40)],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["8XB", "", "lots", -1, 0, 7.5, True, None, "0k", "64 MB",
                                 "7.7GB", "1kb", "2TB"])
def test_parse_size_rejects(bad):
    with pytest.raises(ValueError):
        parse_size(bad)


def test_format_and_kib():
    assert format_size(314572800) == "300MiB"
    assert format_size(int(7.7 * (1 << 30))) == "7.7GiB"
    assert format_size(512) == "512B"
    assert kib(524288) == "512k"


def test_a_decimal_looking_unit_is_refused_with_the_binary_spelling():
    with pytest.raises(ValueError, match=r"^GB is ambiguous \(10\^9 bytes elsewhere\); sizes here "
                                         r"are binary: write 7.7GiB$"):
        parse_size("7.7GB")

