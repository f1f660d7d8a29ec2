"""Thread stacks against the address-space limits: every thread reserves its whole stack when
it starts (glibc maps it at once), so RLIMIT_AS and RLIMIT_DATA refuse threads long before
their memory is used (report 000's "cannot allocate memory for thread-local data", whose own
fix was GOMP_STACKSIZE=512k).

glibc's default stack is RLIMIT_STACK's soft limit as the process starts, or 2 MiB when it is
unlimited (ARCH_STACK_DEFAULT_SIZE, x86_64 and aarch64); libgomp's workers take OMP_STACKSIZE
or GOMP_STACKSIZE where set. RLIMIT_DATA counts private writable mappings (Linux >= 4.7), which
stacks are. glibc's malloc also reserves 64 MiB of address space (not of data) for each
arena a thread takes, up to 8 per CPU (MALLOC_ARENA_MAX): measured here, 15 reservations for
150 idle Python threads on 2 CPUs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from launcher.glibc import ARENA, GUARD, STACK_MIN, STACK_UNLIMITED
from launcher.units import format_size

SHARE = 0.5  # stacks past this share of a limit warn: the interpreter and libraries need the rest
FIT_SIZES = (4 << 20, 2 << 20, 1 << 20)  # --fit's stack sizes, largest first; 1 MiB at least
_OMP = re.compile(r"^\s*(\d+)\s*([bkmgBKMG]?)\s*$")


def default_stack(rlimit_soft: int | None) -> int:
    """glibc's default thread stack for an RLIMIT_STACK soft limit (None or < 0: unlimited)."""
    if rlimit_soft is None or rlimit_soft < 0:
        return STACK_UNLIMITED
    return max(rlimit_soft, STACK_MIN)


def omp_stack(env: dict[str, str]) -> int | None:
    """libgomp's worker stack from GOMP_STACKSIZE (KiB) or OMP_STACKSIZE (KiB by default, or
    with a B/K/M/G suffix); None where neither is set or readable."""
    for name in ("GOMP_STACKSIZE", "OMP_STACKSIZE"):
        m = _OMP.match(env.get(name, ""))
        if m:
            unit = (m.group(2) or "k").lower()
            return int(m.group(1)) * {"b": 1, "k": 1024, "m": 1 << 20, "g": 1 << 30}[unit]
    return None


@dataclass(frozen=True)
class Stacks:
    threads: int  # threads per process, the main one included
    stack: int  # glibc's default
    omp_threads: int  # of them, libgomp workers
    omp: int | None  # their stack, where set
    arenas: int = 0  # malloc arenas beyond the main one the threads may take

    @property
    def reserved(self) -> int:
        """Data the threads' stacks reserve (the main thread's own is the process's)."""
        others = max(self.threads - 1 - self.omp_threads, 0)
        omp = self.omp if self.omp is not None else self.stack
        return others * (self.stack + GUARD) + self.omp_threads * (omp + GUARD)

    @property
    def address_space(self) -> int:
        """Address space they reserve: the stacks and the malloc arenas."""
        return self.reserved + self.arenas * ARENA

    def used(self, limit: str) -> int:
        """What counts against RLIMIT_AS (`as`) or RLIMIT_DATA (`data`)."""
        return self.address_space if limit == "as" else self.reserved

    def describe(self, arenas: bool = False) -> str:
        text = f"{self.threads - 1} thread stacks x {format_size(self.stack)}"
        if self.omp is not None and self.omp_threads:
            text = (f"{self.threads - 1 - self.omp_threads} thread stacks x "
                    f"{format_size(self.stack)} + {self.omp_threads} OpenMP x "
                    f"{format_size(self.omp)}")
        if arenas and self.arenas:
            text += f" + {self.arenas} malloc arenas x 64MiB"
            return f"{text} = {format_size(self.address_space)}"
        return f"{text} = {format_size(self.reserved)}"


def stacks_of(per_process: int, breakdown: dict[str, int], stack_soft: int | None,
              env: dict[str, str], cpus: int, *, omp_parts: tuple[str, ...] = ()) -> Stacks:
    """`omp_parts`: the breakdown's parts that are libgomp workers (OMP_STACKSIZE sizes their
    stacks), as the framework names them."""
    omp_threads = sum(breakdown.get(k, 0) for k in omp_parts)
    try:
        arena_max = int(env["MALLOC_ARENA_MAX"])
    except (KeyError, ValueError):
        arena_max = 8 * cpus  # glibc's default on 64-bit
    arenas = max(min(per_process - 1, arena_max - 1), 0)
    return Stacks(per_process, default_stack(stack_soft), omp_threads, omp_stack(env), arenas)


def stack_reasons(s: Stacks, limits: dict[str, int | None]) -> list[tuple[str, str]]:
    """(level, sentence) for each address-space limit (`as`, `data`: soft, None unlimited) the
    threads of one process exceed (refuse) or take more than SHARE of (warn)."""
    out = []
    for name, limit in limits.items():
        if limit is None or limit <= 0:
            continue
        word, used = {"as": "RLIMIT_AS", "data": "RLIMIT_DATA"}[name], s.used(name)
        fix = "lower limits.stack (glibc's default stack) or threads.omp_stack, or the pools"
        if name == "as" and s.arenas:
            fix += ", or set MALLOC_ARENA_MAX=2"
        what = s.describe(arenas=name == "as")
        if used > limit:
            out.append(("refuse", f"{what} exceed {word} {format_size(limit)}: thread "
                                  f"creation fails (EAGAIN) before the pools are up; {fix}."))
        elif used > SHARE * limit:
            out.append(("warn", f"{what} take {used * 100 // limit}% of {word} "
                                f"{format_size(limit)}, and the interpreter and its libraries "
                                f"need address space too; {fix}."))
    return out


def fits(s: Stacks, limits: dict[str, int | None]) -> bool:
    """The threads take at most SHARE of every address-space limit (the verdict's ok)."""
    return all(limit is None or limit <= 0 or s.used(name) <= SHARE * limit
               for name, limit in limits.items())
