"""Sizes with units: 512k, 8MiB, 7.7GiB, 300m, 1048576."""

from __future__ import annotations

import math
import re

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
_FACTORS = {
    "": 1, "b": 1,
    "k": 1024, "kib": 1024,
    "m": 1024**2, "mib": 1024**2,
    "g": 1024**3, "gib": 1024**3,
    "t": 1024**4, "tib": 1024**4,
}
_DECIMAL = {"kb", "mb", "gb", "tb"}  # 1 GB is 10^9 bytes elsewhere: refused, not guessed


def parse_size(value: object) -> int:
    """Bytes from an int or a string with a binary unit (k, M, GiB; case-insensitive); a
    decimal-looking unit (KB, MB, GB, TB) is refused rather than read as binary.

    Raises ValueError with a short reason on anything else.
    """
    if isinstance(value, bool):
        raise ValueError("expected a size such as 512k or 8MiB")
    if isinstance(value, int):
        if value <= 0:
            raise ValueError("must be positive")
        return value
    if isinstance(value, float):
        raise ValueError("a size in bytes must be whole; add a unit such as 7.7GiB")
    if not isinstance(value, str):
        raise ValueError("expected a size such as 512k or 8MiB")
    m = _SIZE.match(value)
    if not m:
        raise ValueError("expected a size such as 512k or 8MiB")
    number, unit = m.groups()
    factor = _FACTORS.get(unit.lower())
    if unit.lower() in _DECIMAL:
        raise ValueError(f"{unit} is ambiguous (10^{3 * 'kmgt'.index(unit[0].lower()) + 3} "
                         f"bytes elsewhere); sizes here are binary: write {number}"
                         f"{unit[0].upper()}iB")
    if factor is None:
        raise ValueError(f"unknown unit {unit!r} (use k, M, G, T, KiB, MiB, GiB)")
    size = math.floor(float(number) * factor)
    if size <= 0:
        raise ValueError("must be positive")
    return size


def format_size(n: int) -> str:
    """Short human form: 314572800 -> '300MiB', 8270000000 -> '7.7GiB'."""
    for unit, factor in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= factor:
            v = n / factor
            return f"{v:.0f}{unit}" if v == int(v) or v >= 100 else f"{v:.1f}{unit}"
    return f"{n}B"


def mib_up(n: int) -> str:
    """Bytes as whole MiB, rounded up: the one rounding of a size that is printed and
    written (`workers.memory`)."""
    return f"{-(-n // 2**20)}MiB"


def term(n: float, unit: str) -> str:
    """A term of a sum with its sign in front: `+ 1,346 bytes`, `- 1,346 bytes`."""
    return f"{'-' if n < 0 else '+'} {abs(n):,.0f} {unit}"


def kib(n: int) -> str:
    """An OpenMP stack size in KiB with its suffix, e.g. 524288 -> '512k'."""
    return f"{max(1, n // 1024)}k"


def format_rlimit(name: str, value: int) -> str:
    """An rlimit as `ulimit` shows it: -1 unlimited, sizes (stack, memlock) with units."""
    if value < 0:
        return "unlimited"
    return format_size(value) if name in ("stack", "memlock") else str(value)
