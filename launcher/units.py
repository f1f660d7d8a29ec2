"""Sizes with units: 512k, 8MiB, 7.7GiB, 300m, 1048576."""

from __future__ import annotations

import math
import re

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
_FACTORS = {
    "": 1, "b": 1,
    "k": 1024, "kb": 1024, "kib": 1024,
    "m": 1024**2, "mb": 1024**2, "mib": 1024**2,
    "g": 1024**3, "gb": 1024**3, "gib": 1024**3,
    "t": 1024**4, "tb": 1024**4, "tib": 1024**4,
}


def parse_size(value: object) -> int:
    """Bytes from an int or a string with a binary unit (k, M, GiB; case-insensitive).

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


def kib(n: int) -> str:
    """An OpenMP stack size in KiB with its suffix, e.g. 524288 -> '512k'."""
    return f"{max(1, n // 1024)}k"
