"""A failure too brief for any sample, named from the workload's own words and the limits it
started under. Frameworks abort within milliseconds of a failed `pthread_create`, so the peak
that killed them is seldom counted; their text is, and so are the limits. The cause named is
the likeliest, and said to be: the limit that allows the fewest threads, among those the text
fits."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from launcher.telemetry.scan import Chunk, Lines
from launcher.units import format_size

GUARD = 4096  # glibc's guard page under each thread's stack
# (kind, pattern): a thread could not be created (EAGAIN or ENOMEM), or memory for one could not
TEXTS = (
    ("thread", re.compile(r"can't start new thread|pthread_create|Thread creation failed|"
                          r"Resource temporarily unavailable|failed to create thread|"
                          r"thread creation via pthread_create", re.IGNORECASE)),
    ("memory", re.compile(r"cannot allocate memory for thread-local data|"
                          r"Cannot allocate memory|std::bad_alloc|MemoryError|"
                          r"memory allocation failed", re.IGNORECASE)),
    ("files", re.compile(r"Too many open files|EMFILE", re.IGNORECASE)),
)


# the words each kind's patterns begin with, lowered: a chunk is searched only where it
# holds one (a substring test in C), never line by line
_HINTS = {"thread": (b"can't start", b"pthread_create", b"thread creation", b"resource temp",
                     b"failed to create thread"),
          "memory": (b"cannot allocate", b"bad_alloc", b"memoryerror", b"memory allocation"),
          "files": (b"too many open", b"emfile")}


@dataclass
class FailureText:
    """The first line of each kind the workload printed, kept as the output goes past: of
    each chunk, the shapes whose words could be one (launcher/telemetry/scan.py)."""

    found: dict[str, str] = field(default_factory=dict)
    lines: Lines = field(default_factory=Lines)
    hinted: dict[bytes, tuple[str, ...]] = field(default_factory=dict)  # shape -> kinds

    @property
    def partial(self) -> dict[str, bytes]:
        return self.lines.partial

    def feed(self, data: bytes, stream: str = "stdout") -> None:
        if len(self.found) == len(TEXTS):
            return
        chunk, _ = self.lines.feed(stream, data)
        if chunk is not None:
            self.scan(chunk)

    def scan(self, chunk: Chunk) -> None:
        for part in chunk.parts():
            self._scan(part)

    def _scan(self, chunk: Chunk) -> None:
        if len(self.found) == len(TEXTS):
            return
        for key in chunk.counts:
            kinds = self.hinted.get(key)
            if kinds is None:
                if len(self.hinted) >= 4096:
                    self.hinted.clear()
                low = key.lower()
                kinds = self.hinted[key] = tuple(k for k, hints in _HINTS.items()
                                                 if any(h in low for h in hints))
            for kind in kinds:
                if kind in self.found:
                    continue
                line = chunk.line(key).decode(errors="replace").strip()
                if dict(TEXTS)[kind].search(line):
                    self.found[kind] = line[:200]


def likeliest(found: dict[str, str], at: dict[str, Any]) -> str | None:
    """One clause naming the likeliest limit behind the failure text `found` (kind -> line),
    from `at` (the supervisor's `limits_at_start`); None when no limit fits the words."""
    found = {k: v for k, v in found.items() if k in ("thread", "memory")}
    if not found:
        return None
    stack = int(at.get("stack") or 8 << 20) + GUARD
    threads = int(at.get("threads_seen") or 0)
    room: list[tuple[float, str]] = []  # (threads it allows, the clause)
    memory_words = "memory" in found and "thread" not in found
    if at.get("nproc") is not None and not at.get("nproc_exempt") and not memory_words:
        allows = at["nproc"] - int(at.get("uid_tasks_outside") or 0)
        room.append((allows, f"RLIMIT_NPROC {at['nproc']} for UID {at.get('uid')} (about "
                             f"{max(allows, 0)} threads for the workload; raise limits.nproc "
                             f"or lower the thread caps)"))
    if at.get("pids_max") is not None and not memory_words:
        room.append((at["pids_max"], f"pids.max {at['pids_max']} (raise limits.pids or lower "
                                     f"the thread caps)"))
    for key, seen, word, fix in (("address_space", "vm_size_seen", "RLIMIT_AS", "ulimit -v"),
                                 ("data", "vm_data_seen", "RLIMIT_DATA", "ulimit -d")):
        if at.get(key) is not None:
            allows = threads + max(0, at[key] - int(at.get(seen) or 0)) / stack
            room.append((allows, f"{word} {format_size(at[key])}, with each thread reserving a "
                                 f"{format_size(stack - GUARD)} stack (set limits.stack and "
                                 f"threads.omp_stack smaller, or raise {fix})"))
    if at.get("threads_max") is not None and not memory_words:
        room.append((at["threads_max"], f"kernel.threads-max {at['threads_max']} (raise it "
                                        f"with sysctl, or lower the thread caps)"))
    peak = at.get("tasks_peak")
    if peak is not None:  # the kernel counted every task at once: a limit with room for far
        room = [r for r in room if r[0] <= 2 * peak + 8]  # more was never reached, whatever
    if not room:  # the words say (a test's name, a caught error)
        return None
    _, clause = min(room, key=lambda r: r[0])
    kind = "thread" if "thread" in found else "memory"
    return (f"likeliest (not counted: the peak was shorter than a sample), {clause}: the "
            f"workload printed {found[kind]!r}")
