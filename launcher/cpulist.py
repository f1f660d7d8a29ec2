"""CPU lists as the kernel writes them (`0-3,8,10-11`): cpuset.cpus, Cpus_allowed_list, a
profile's limits.cpuset. Standard library only (the supervisor uses it)."""

from __future__ import annotations

MAX_CPUS = 65536  # beyond any kernel's NR_CPUS: a typo, not a machine


def cpu_ids(text: str) -> set[int]:
    """The CPUs of a list; ValueError for a malformed one (a range whose end is below its
    start included)."""
    ids: set[int] = set()
    for part in text.strip().split(","):
        if not part.strip():
            continue
        lo, dash, hi = part.partition("-")
        first, last = int(lo), int(hi) if dash else int(lo)
        if first < 0 or last < first or last >= MAX_CPUS:
            raise ValueError(f"bad CPU range {part!r}")
        ids.update(range(first, last + 1))
    return ids


def format_cpu_list(ids: list[int]) -> str:
    """[1, 2, 3, 5] -> '1-3,5' (sorted ids)."""
    out: list[str] = []
    start: int | None = None
    for i, c in enumerate(ids):
        if start is None:
            start = c
        if i + 1 == len(ids) or ids[i + 1] != c + 1:
            out.append(str(start) if start == c else f"{start}-{c}")
            start = None
    return ",".join(out)
