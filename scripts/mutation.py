"""Mutation testing of launcher's core modules: does the test suite notice a small change?

Usage (from the repository root):

    .venv/bin/python scripts/mutation.py                      # every module in TESTS
    .venv/bin/python scripts/mutation.py launcher/units.py --list-survivors
    .venv/bin/python scripts/mutation.py launcher/units.py --tests tests/test_units.py
    .venv/bin/python scripts/mutation.py --jobs 4 --json > mutation.json
    .venv/bin/python scripts/mutation.py --operators statement,return,string,float,swap,loop \
        --sample 15 --seed 1 --jobs 1                        # a seeded sample of the new ones

How it works. The tree (launcher/, tests/, profiles/, ... without .git, .venv and build
outputs) is copied once into a temporary folder, then once more per job. Each mutant is one
small change (`<` to `<=`, `and` to `or`, 7 to 8, a condition negated, `min` to `max`, a
statement deleted, a return value replaced by None, a string or float constant changed, two
arguments swapped, `break` for `continue`; OPERATORS below names each kind) patched into the
source text of one module of a job's copy at the changed node's offsets, so the rest of the
file stays byte-identical; the tests mapped to that module (`TESTS` below) run there with
`python -m pytest -x`, with PYTHONPATH and the working directory set to the copy, and the
module and its .pyc are restored afterwards. A mutant is killed when pytest fails or times out
(5x the clean run, at least 60 s), and survives when it passes. Processes a run leaves behind
(launcher's supervisors start sessions of their own) are killed by id. The working tree itself
is never written.

The copy is what gets imported: PYTHONPATH comes before the editable install's .pth entry
(which points at the original tree), the tests start `python -m launcher` with PYTHONPATH set
to their own root (the copy), and the supervisor's entrypoint puts its own package root first.
Before any mutant the script checks it twice: a process started outside the copy with the
tests' environment imports each module from the copy, and the tests fail against a module
that raises on import (a "canary").

Equivalent mutants (no input could tell them from the original) are left out of the pool: a
whole line by `# pragma: no mutate` in the source, one mutant by an entry of EQUIVALENT below
(with its reason; the run's JSON lists them under each module's "equivalent").

Why not mutmut: it is not a dependency here (standard library only), and mutmut 3 does not
fit these tests. It compiles every mutant of a function into its `mutants/` copy behind a
trampoline that reads os.environ["MUTANT_UNDER_TEST"] on each call. Subprocesses given an
environment of their own (tests/test_everyday.py; the kernel helpers of
tests/test_cgroup_placement.py pass env={"PYTHONPATH": ROOT}) would stop there with a
KeyError, a kill that says nothing about the tests. And it mutates only inside undecorated
functions and classes: module-level tables (units._FACTORS, cgroup.V1_UNLIMITED) and the
@dataclass records of placement.py (Placement.describe included) are never changed. Here each
mutant is a plain source file that every process importing the copy runs.

Exit status: 0 (whatever the score), 1 when the tests fail on the unmutated copy or the copy
is not what they import, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import itertools
import json
import os
import queue
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# module -> the unit-level test files that exercise it, the most direct first (-x stops at
# the first failure): the pins first (tests/test_mutants_core_pins.py and
# test_mutants_growth_pins.py: each output compared whole with a golden file, in a second or
# two). Left out on purpose: docker, podman, ray and UML lab tests, the thread estimates and
# jobs (minutes), tests/test_everyday.py, and tests/test_native.py except for the supervisor's
# diagnosis (diagnose.py never decides a limit, so a mutant there cannot let a thread bomb or
# a memory hog loose on this host).
CORE_PINS = "tests/test_mutants_core_pins.py"
SUPERVISOR_UNITS = "tests/test_supervise_units.py"
SUPERVISOR = ("run", "start", "spawn", "loop", "pump", "reading", "lazy", "watcher", "lifeline",
              "terminal", "record")
SUPERVISOR_OWN = {name: [f"tests/test_supervise_{name}.py"] for name in SUPERVISOR}
TESTS: dict[str, list[str]] = {
    "launcher/caps/budget.py": [CORE_PINS, "tests/test_budget.py", "tests/test_verdict_bounds.py",
                                "tests/test_caps.py",
                                "tests/test_fit.py", "tests/test_cli.py",
                                "tests/test_plan_golden.py", "tests/test_run_cli.py"],
    "launcher/units.py": [CORE_PINS, "tests/test_mutants_units.py", "tests/test_units.py",
                          "tests/test_wording.py", "tests/test_caps.py",
                          "tests/test_profiles.py"],
    "launcher/caps/verdict.py": [CORE_PINS, "tests/test_mutants_guards.py",
                                 "tests/test_verdict_bounds.py", "tests/test_fit.py",
                                 "tests/test_caps.py", "tests/test_cli.py",
                                 "tests/test_plan_golden.py", "tests/test_run_cli.py"],
    "launcher/probe/cgroup.py": [CORE_PINS, "tests/test_mutants_guards.py",
                                 "tests/test_mutants_cgroup_probe.py", "tests/test_probe.py",
                                 "tests/test_cgroup_placement.py", "tests/test_caps.py",
                                 "tests/test_cli.py"],
    "launcher/supervise/diagnose.py": [CORE_PINS, "tests/test_mutants_guards.py",
                                       "tests/test_thread_causes.py", "tests/test_native.py"],
    "launcher/caps/fit.py": [CORE_PINS, "tests/test_mutants_guards.py",
                             "tests/test_verdict_bounds.py", "tests/test_fit.py",
                             "tests/test_caps.py"],
    "launcher/cgroups/placement.py": [CORE_PINS, "tests/test_mutants_guards.py",
                                      "tests/test_mutants_placement.py",
                                      "tests/test_cgroup_placement.py"],
    # issue 21's: the thread-failure causes, the stacks against the address space
    "launcher/supervise/causes.py": ["tests/test_thread_causes.py"],
    "launcher/supervise/evidence.py": ["tests/test_mutants_guards.py",
                                       "tests/test_stacks_evidence.py",
                                       "tests/test_thread_causes.py"],
    "launcher/caps/stacks.py": ["tests/test_stacks_evidence.py", "tests/test_verdict_bounds.py",
                                "tests/test_fit.py"],
    # the growth watch (telemetry): the cycles, the trend, the census, the likeliest limit
    **{f"launcher/telemetry/{name}.py": ["tests/test_mutants_growth_pins.py",
                                         "tests/test_mutants_guards.py", "tests/test_growth.py"]
       for name in ("growth", "growth_words", "cycles", "growth_watch", "census", "failures",
                    "growth_verdict")},
    # issue 47's: the supervisor's units (its stages, the loop, the pump, the lazy watch),
    # each module's own tests first (tests/test_supervise_NAME.py)
    **{f"launcher/supervise/{name}.py": [*SUPERVISOR_OWN[name], SUPERVISOR_UNITS,
                                         "tests/test_scan_budget.py",
                                         "tests/test_transparent.py"]
       for name in SUPERVISOR},
}
# The core modules (--core; the default run is every module in TESTS): the seven the docs'
# figures are of, and the growth watch's.
CORE = ["launcher/caps/budget.py", "launcher/units.py", "launcher/caps/verdict.py",
        "launcher/probe/cgroup.py", "launcher/supervise/diagnose.py", "launcher/caps/fit.py",
        "launcher/cgroups/placement.py",
        *(f"launcher/telemetry/{name}.py" for name in ("growth", "growth_words", "cycles",
                                                       "growth_watch", "census", "failures",
                                                       "growth_verdict"))]
# Tests never run here (pytest -k): they share host state between parallel copies.
DESELECT = {
    "test_kernel_": "write the host's real cgroup2 tree (and toggle hugetlb at its root)",
    "test_leftover_check_sees_a_run_cgroup": "makes a cgroup of a fixed name on the host",
    "test_a_reader_that_pauses_gets_every_byte": "35 s of a paced reader, each mutant (the "
                                                 "pump's every byte: test_transparent's others)",
}
# Not copied: version control, the virtualenv, build outputs and caches.
IGNORE = shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__",
                                ".hypothesis", ".ruff_cache", ".pytest_cache", "*.log",
                                "mutants")
PRAGMA = "# pragma: no mutate"
# Equivalent mutants: no run of launcher can tell them from the original, each with the reason.
# Left out of the pool as a pragma's line is, but one mutant, not every mutant of its line.
# Keyed by module, operator, the mutant's first source line (stripped) and the text it changes,
# so an edit elsewhere in the module keeps the entry; an entry that matches nothing is warned
# of (stale). Keep it short: a mutant that any input could tell apart needs a test instead.
PUMP = "launcher/supervise/pump.py"
WATCHER = "launcher/supervise/watcher.py"
LIFELINE = "launcher/supervise/lifeline.py"
HOST_LINE = 'host = "".join(ch for ch in os.uname().nodename if ch.isalnum() or ch in "-_")[:24]'
SUBREAPER = "ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)"
EQUIVALENT: dict[tuple[str, str, str, str], str] = {
    ("launcher/telemetry/growth_watch.py", "string",
     'lim = show(t.series, t.limit) if t.limit else "?"', '"?"'):
        "dead branch: a stop is decided for a trend that reaches its limit, and only a limit "
        "sets `reached` (growth.fit)",
    ("launcher/telemetry/growth_watch.py", "float",
     "if came - self.marked_at.get(b.unit, -1e9) < MIN_BOUNDARY_S:", "1e9"):
        "-1e9 or -1e9-1 as a unit's last boundary: time.monotonic() is never below 0, so its "
        "first boundary is recorded either way",
    ("launcher/telemetry/growth_watch.py", "statement", "next_window: float = 0.0",
     "next_window: float = 0.0"):
        "the field's default: __post_init__ sets it to the window before anything reads it",
    ("launcher/telemetry/growth_watch.py", "float", "next_window: float = 0.0", "0.0"):
        "the field's default: __post_init__ sets it to the window before anything reads it",
    ("launcher/telemetry/growth.py", "statement", "Row = Dict[str, Any]",
     "Row = Dict[str, Any]"):
        "a type alias read in annotations only, which are never evaluated (from __future__ "
        "import annotations)",
    ("launcher/telemetry/growth.py", "swap",
     "uncertainty = math.hypot(ahead * se, math.sqrt(ahead) * sd) / mean if mean else None",
     "ahead * se, math.sqrt(ahead) * sd"):
        "math.hypot is symmetric: its two arguments swapped are the same length",
    ("launcher/supervise/diagnose.py", "statement", "c.oom_kills = None",
     "c.oom_kills = None"):
        "the except's: KernelCounters() starts oom_kills at None and the failed read set nothing, "
        "so it is None either way",
    ("launcher/cgroups/placement.py", "float", "best = (0.0, effective, d)", "0.0"):
        "a cpuset's size is never compared: the break right after it ends the search",
    ("launcher/supervise/start.py", "string",
     'def __init__(self, env: dict[str, str], cgroups: list[str] | None = None, undo: str = "",',
     '""'):
        "Prepared.undo is read only by undo_leaves, through contract.decode_undo, which reads "
        "any text that is not JSON (as 'XXXX') as no moves, as it reads \"\"",
    ("launcher/supervise/spawn.py", "number", 'DUP2 = getattr(os, "POSIX_SPAWN_DUP2", 2)', "2"):
        "the default is read only where os lacks the constant (3.7), and then only by "
        "fork_exec, against OPEN's 0: 3 is told from 0 as 2 is",
    ("launcher/supervise/spawn.py", "string", 'DUP2 = getattr(os, "POSIX_SPAWN_DUP2", 2)',
     '"POSIX_SPAWN_DUP2"'):
        "the default, 2, is os.POSIX_SPAWN_DUP2's own value (CPython's enum: OPEN 0, CLOSE 1, "
        "DUP2 2)",
    ("launcher/telemetry/census.py", "statement",
     "Census = Dict[str, Dict[str, int]]  # pool label -> {thread name: count}",
     "Census = Dict[str, Dict[str, int]]"):
        "a type alias read in annotations only, which are never evaluated (from __future__ "
        "import annotations)",
    # loop.py, lazy.py, reading.py (issue 47's helper-found; reading's line 139 checked on
    # every input of up to 5 bytes and words of up to 2)
    ("launcher/supervise/loop.py", "number", "os.read(wake_r, 4096)", "4096"):
        "one byte per signal on the wake pipe: 4097 differs only with 4097 waiting at once, and "
        "then a byte left over makes one more empty turn",
    ("launcher/supervise/loop.py", "number", "if done <= 0:", "0"):
        "waitpid(-1) gives this process's children, never pid 1: done is never 1",
    ("launcher/supervise/loop.py", "swap",
     "with contextlib.suppress(ProcessLookupError, PermissionError):",
     "ProcessLookupError, PermissionError"): "suppress takes its exception types in any order",
    ("launcher/supervise/lazy.py", "compare", "if wait > 0:", ">"):
        "differs only where the wait is exactly 0.0, and then the next tick, at once, starts it",
    ("launcher/supervise/reading.py", "float", "started: float = field(default=-1.0)", "1.0"):
        "any negative start means none given (if self.started < 0)",
    ("launcher/supervise/reading.py", "compare",
     "end = start + 1 if start >= 0 else 0  # cut: the line before", ">="):
        "start > 0 differs at start 0 only, where end is 1 or 0: a match in [0, 1) is never a "
        "whole line",
    ("launcher/supervise/reading.py", "number",
     "at = line.lower().find(unit) if line else -1", "1"):
        "at is read only under `if line and at >= 0`: with no line, whatever it is",
    # watcher.py and lifeline.py (issue 47's helper-found, each checked by hand)
    (WATCHER, "string", HOST_LINE, '"-_"'):
        "the X added to the kept characters is kept by isalnum() already",
    (WATCHER, "number",
     "theirs, theirs_v2 = memory_dir_of(pid) if _running(pid) else (None, False)", "False"):
        "theirs_v2 is read only where theirs is a directory, never with theirs None",
    (WATCHER, "compare", "if self.kill_at is not None and time.monotonic() >= self.kill_at:",
     ">="): "differs only where two clock readings are equal floats: no test can make them",
    (WATCHER, "swap", "with contextlib.suppress(OSError, ValueError):", "OSError, ValueError"):
        "suppress takes its exception types in any order",
    (LIFELINE, "swap", "with contextlib.suppress(OSError, AttributeError):",
     "OSError, AttributeError"): "suppress takes its exception types in any order",
    (LIFELINE, "swap", "with contextlib.suppress(ProcessLookupError, PermissionError):",
     "ProcessLookupError, PermissionError"): "suppress takes its exception types in any order",
    (LIFELINE, "number", SUBREAPER, "True"):
        "use_errno keeps errno for ctypes.get_errno(), which nothing reads",
    (LIFELINE, "number", SUBREAPER, "0"):
        "PR_SET_CHILD_SUBREAPER reads its second argument alone (kernel/sys.c)",
    (LIFELINE, "compare", "while time.monotonic() < deadline:", "<"):
        "differs only where a clock reading equals the deadline's float exactly",
    (LIFELINE, "compare",
     "while descendants(os.getpid()) and time.monotonic() < deadline + grace:", "<"):
        "differs only where a clock reading equals the deadline's float exactly",
    (LIFELINE, "number", "def _reap(pid: int = 0) -> int | None:", "0"):
        "waitpid(-1) gives this process's children, never pid 1 (not even in a namespace "
        "whose PID 1 it is)",
    (LIFELINE, "number", "if done <= 0:", "0"):
        "waitpid(-1) gives this process's children, never pid 1: done is never 1",
    (LIFELINE, "loop", "break  # removed", "break"):
        "continue instead: the next rmdir finds it gone (FileNotFoundError) and breaks",
    (LIFELINE, "loop", "break  # removed already", "break"):
        "continue instead: at most 49 more rmdirs that find it gone at once, the same end",
    # pump.py: where the supervisor's own lines landed in a file read back (Tail._theirs)
    (PUMP, "compare", "if b > at and a < end:", ">"):
        "an entry with b == at appends data[at:at] (empty) and leaves at as it was",
    (PUMP, "compare", "if b > at and a < end:", "<"):
        "an entry with a == end appends data[at:end], the rest, and sets at to end: the last "
        "append is then empty; the same bytes either way",
    (PUMP, "boolean", "if self.ours and data:", "and"):
        "_theirs of no data is b'' and of no entries is the data itself",
    (PUMP, "swap", "one_stream or os.path.samestat(st, usable[1])):", "st, usable[1]"):
        "os.path.samestat is symmetric",
    (PUMP, "swap", "if self.tails and os.path.samestat(st, os.fstat(1)):", "st, os.fstat(1)"):
        "os.path.samestat is symmetric",
    (PUMP, "swap", "if st is not None and os.path.samestat(st, t.st):", "st, t.st"):
        "os.path.samestat is symmetric",
    (PUMP, "loop", "continue", "continue"):
        "the continue after one stream is found (self.said_to = 1) is in the loop's last "
        "iteration (fd 2): break ends it the same",
    (PUMP, "swap", "with contextlib.suppress(termios.error, OSError):",
     "termios.error, OSError"):
        "suppress takes its exception types in any order",
    (PUMP, "number", 'return fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\\0" * 8)', "8"):
        "a struct winsize is 8 bytes: TIOCGWINSZ fills those of a 9-byte buffer, TIOCSWINSZ "
        "reads those of it, and two 9-byte sizes compare as their 8 bytes do",
    (PUMP, "swap", "tty.setraw(0, termios.TCSANOW)", "0, termios.TCSANOW"):
        "termios.TCSANOW is 0: the same two arguments",
    (PUMP, "string", 'self.streams.append(Stream("stdin", 0, master, master))', '"stdin"'):
        "a stream's name is read by gone() alone, which the lifeline calls with stdout or "
        "stderr; stdin relayed to a console is never passed to the watch (src 0)",
    (PUMP, "float", "return TAIL_S if self.tails else 3600.0", "3600.0"):
        "with no files read back tail() reads nothing, so when it is next due changes nothing",
}
MARK = "MUTATION_WORKER"  # in the environment of each run: its processes are found by it
MIN_TIMEOUT_S = 60.0
TIMEOUT_FACTOR = 5.0
CLEAN_TRIES = 3  # the unmutated tests' run, before the clean run counts as failed

# operator swaps: AST class -> (its text, the replacement's text)
COMPARE = {ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"), ast.Gt: (">", ">="),
           ast.GtE: (">=", ">"), ast.Eq: ("==", "!="), ast.NotEq: ("!=", "=="),
           ast.In: ("in", "not in"), ast.NotIn: ("not in", "in"), ast.Is: ("is", "is not"),
           ast.IsNot: ("is not", "is")}
BINARY = {ast.Add: ("+", "-"), ast.Sub: ("-", "+"), ast.Mult: ("*", "//"),
          ast.FloorDiv: ("//", "*"), ast.Div: ("/", "*"), ast.Mod: ("%", "//")}
# the kinds of mutant (--operators picks some): name -> what it changes
OPERATORS = {
    "compare": "a comparison: < to <=, == to !=, in to not in, is to is not, ...",
    "binary": "an arithmetic operator (augmented too): + to -, * to //, / to *, % to //",
    "boolean": "and to or, or to and",
    "number": "an int constant n to n+1 (0 to 1, 1 to 0); True to False and back",
    "minmax": "min to max, max to min",
    "not": "a `not` removed",
    "condition": "an if, while or conditional expression's test negated",
    "statement": "a statement deleted (an expression, assignment, raise, del: `pass` instead;"
                 " not a docstring, nor a field declared without a value)",
    "return": "a return value replaced by None",
    "string": "a string constant changed ('XX' around it; docstrings are left alone)",
    "float": "a float constant x to x+1",
    "swap": "two neighbouring positional arguments of a call swapped (not min's or max's, nor"
            " two equal constants)",
    "loop": "break to continue, continue to break",
}
DELETABLE = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Raise, ast.Delete)


@dataclass(frozen=True)
class Mutant:
    module: str
    line: int
    original: str  # the changed text, as written
    mutated: str
    edits: tuple[tuple[int, int, str], ...]  # (start, end, replacement), byte offsets
    operator: str = ""  # its kind, a key of OPERATORS

    def apply(self, source: bytes) -> bytes:
        for start, end, text in sorted(self.edits, reverse=True):
            source = source[:start] + text.encode() + source[end:]
        return source


@dataclass
class Result:
    mutant: Mutant
    status: str  # killed | timeout | survived
    seconds: float


@dataclass
class Score:
    mutants: int = 0
    killed: int = 0  # timeouts included
    timeout: int = 0
    survived: int = 0
    survivors: list[dict[str, object]] = field(default_factory=list)

    @property
    def score(self) -> float:
        return 100.0 * self.killed / self.mutants if self.mutants else 100.0


# Finding mutants


class _Source:
    """A module's text with byte offsets for AST positions (col_offset counts UTF-8 bytes)."""

    def __init__(self, text: str) -> None:
        self.data = text.encode()
        self.starts = [0]
        for line in self.data.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))
        self.pragma = {n for n, line in enumerate(text.splitlines(), 1) if PRAGMA in line}

    def start(self, node: ast.AST) -> int:
        return self.starts[node.lineno - 1] + node.col_offset  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> int:
        return self.starts[node.end_lineno - 1] + node.end_col_offset  # type: ignore[attr-defined]

    def text(self, start: int, end: int) -> str:
        return self.data[start:end].decode()

    def line_of(self, offset: int) -> int:
        return next(n for n, s in enumerate(self.starts[1:], 1) if offset < s)

    def segment(self, node: ast.AST) -> str | None:
        """The node's text, when it parses back to the node (f-string parts may not, before
        Python 3.12)."""
        text = self.text(self.start(node), self.end(node))
        try:
            again = ast.parse(f"({text})", mode="eval").body
        except SyntaxError:
            return None
        return text if ast.dump(again) == ast.dump(node) else None


def _nodes(node: ast.AST) -> Iterator[ast.AST]:
    """Every node but those of type annotations and assert statements."""
    yield node
    for name, value in ast.iter_fields(node):
        if name in ("annotation", "returns") or isinstance(value, ast.Assert):
            continue
        children = value if isinstance(value, list) else [value]
        for child in children:
            if isinstance(child, ast.AST) and not isinstance(child, ast.Assert):
                yield from _nodes(child)


def _operator_edit(src: _Source, left: ast.AST, right: ast.AST,
                   swaps: tuple[str, str]) -> tuple[int, int, str, str] | None:
    """Swap the operator written between two operands: (start, end, old, new)."""
    gap_start, gap_end = src.end(left), src.start(right)
    gap = src.text(gap_start, gap_end)
    old, new = swaps
    if re.sub(r"[\s()\\]", "", gap) != old.replace(" ", ""):
        return None  # a comment or something unexpected between the operands: leave it
    pattern = r"\s+".join(re.escape(w) for w in old.split())
    pattern = rf"(?<![\w=<>!*/]){pattern}(?![\w=<>*/])"
    found = re.search(pattern, gap)
    if found is None:
        return None
    return gap_start + found.start(), gap_start + found.end(), found.group(), new


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the bare string statements (docstrings, and strings standing alone as notes)
    and of their strings: neither is deleted nor changed."""
    return {i for n in ast.walk(tree) if isinstance(n, ast.Expr)
            and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
            for i in (id(n), id(n.value))}


def find_mutants(module: str, text: str, operators: set[str] | None = None,
                 equivalent: list[tuple[Mutant, str]] | None = None) -> list[Mutant]:
    """Every mutant of the module (of `operators`), in source order; those EQUIVALENT lists
    are left out (and appended to `equivalent`, with their reason, where given)."""
    src = _Source(text)
    lines = text.splitlines()
    tree = ast.parse(text)
    notes = _docstrings(tree)
    out: list[Mutant] = []

    def add(edits: list[tuple[int, int, str]], original: str, mutated: str,
            operator: str) -> None:
        if operators is not None and operator not in operators:
            return
        first = src.line_of(min(s for s, _, _ in edits))
        last = src.line_of(max(e for _, e, _ in edits) - 1)
        if any(n in src.pragma for n in range(first, last + 1)):
            return
        m = Mutant(module, first, original, mutated, tuple(edits), operator)
        why = EQUIVALENT.get((module, operator, lines[first - 1].strip(), original))
        if why is not None:
            if equivalent is not None:
                equivalent.append((m, why))
            return
        out.append(m)

    def replace(node: ast.AST, new: str, operator: str) -> None:
        start, end = src.start(node), src.end(node)
        add([(start, end, new)], src.text(start, end), new, operator)

    for node in _nodes(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for i, op in enumerate(node.ops):
                edit = _operator_edit(src, operands[i], operands[i + 1], COMPARE[type(op)])
                if edit:
                    add([(edit[0], edit[1], edit[3])], edit[2], edit[3], "compare")
        elif isinstance(node, ast.BinOp) and type(node.op) in BINARY:
            edit = _operator_edit(src, node.left, node.right, BINARY[type(node.op)])
            if edit:
                add([(edit[0], edit[1], edit[3])], edit[2], edit[3], "binary")
        elif isinstance(node, ast.AugAssign) and type(node.op) in BINARY:
            old, new = BINARY[type(node.op)]
            edit = _operator_edit(src, node.target, node.value, (old + "=", new + "="))
            if edit:
                add([(edit[0], edit[1], edit[3])], edit[2], edit[3], "binary")
        elif isinstance(node, ast.BoolOp):
            word, other = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
            edits = []
            for left, right in itertools.pairwise(node.values):
                edit = _operator_edit(src, left, right, (word, other))
                if edit is None:
                    break
                edits.append((edit[0], edit[1], other))
            else:
                add(edits, word, other, "boolean")
        elif isinstance(node, ast.Constant) and src.segment(node) is not None:
            value = node.value
            seg = src.segment(node) or ""
            if isinstance(value, bool):
                add([(src.start(node), src.end(node), str(not value))], str(value),
                    str(not value), "number")
            elif isinstance(value, int):
                for new in dict.fromkeys([value + 1, *([1] if value == 0 else []),
                                          *([0] if value == 1 else [])]):
                    add([(src.start(node), src.end(node), str(new))], seg, str(new), "number")
            elif isinstance(value, float):
                replace(node, repr(value + 1.0), "float")
            elif isinstance(value, str) and id(node) not in notes:
                replace(node, repr(f"XX{value}XX"), "string")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("min", "max")):
            new = "max" if node.func.id == "min" else "min"
            add([(src.start(node.func), src.end(node.func), new)], node.func.id, new, "minmax")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            seg = src.segment(node)
            if seg is not None:
                rest = re.sub(r"^not\b\s*", "", seg)
                add([(src.start(node), src.end(node), rest)], seg, rest, "not")
        elif isinstance(node, ast.Break):
            replace(node, "continue", "loop")
        elif isinstance(node, ast.Continue):
            replace(node, "break", "loop")
        elif (isinstance(node, ast.Return) and node.value is not None
              and not (isinstance(node.value, ast.Constant) and node.value.value is None)):
            replace(node.value, "None", "return")
        if isinstance(node, (ast.If, ast.While, ast.IfExp)):
            test = node.test
            seg = src.segment(test)
            if seg is not None and not (isinstance(test, ast.UnaryOp)
                                        and isinstance(test.op, ast.Not)):
                add([(src.start(test), src.end(test), f"not ({seg})")], seg, f"not ({seg})",
                    "condition")
        if (isinstance(node, DELETABLE) and id(node) not in notes
                and not (isinstance(node, ast.AnnAssign) and node.value is None)):
            replace(node, "pass", "statement")
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name)
                                               and node.func.id in ("min", "max")):
            # (min and max are symmetric: their arguments swapped is the same call)
            positional = [a for a in node.args if not isinstance(a, ast.Starred)]
            if len(positional) == len(node.args):
                for left, right in itertools.pairwise(node.args):
                    one, two = src.segment(left), src.segment(right)
                    if one is None or two is None or one == two or (
                            isinstance(left, ast.Constant) and isinstance(right, ast.Constant)
                            and left.value == right.value):
                        continue  # the same value either way (False and 0.0 included)
                    add([(src.start(left), src.end(left), two),
                         (src.start(right), src.end(right), one)],
                        f"{one}, {two}", f"{two}, {one}", "swap")

    unique: dict[tuple[tuple[int, int, str], ...], Mutant] = {}
    for m in out:  # each must parse and change the tree
        mutated = m.apply(src.data).decode()
        try:
            changed = ast.dump(ast.parse(mutated)) != ast.dump(tree)
        except SyntaxError:
            changed = False
        if changed:
            unique.setdefault(m.edits, m)
    return sorted(unique.values(), key=lambda m: (m.line, m.edits))


# Running the tests in private copies


def _env(copy: Path, tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(copy)  # before the editable install's entry for /work/main
    env["TMPDIR"] = str(tmp)  # pytest's tmp_path of each copy apart from the others'
    env[MARK] = str(copy.parent)
    for name in ("PYTHONHOME", "PYTHONSAFEPATH", "PYTHONNOUSERSITE", "PYTEST_ADDOPTS"):
        env.pop(name, None)
    return env


class Worker:
    """One private copy of the tree; one pytest run at a time."""

    def __init__(self, base: Path, where: Path) -> None:
        self.copy = where / "tree"
        self.tmp = where / "tmp"
        shutil.copytree(base, self.copy, symlinks=True)
        self.tmp.mkdir()

    def _drop_bytecode(self, module: str) -> None:
        # a .pyc records the source's mtime in whole seconds and its size: a same-size
        # mutant written within the second would run the previous bytecode
        path = self.copy / module
        for pyc in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
            pyc.unlink(missing_ok=True)

    def pytest(self, tests: list[str], timeout: float) -> tuple[str, float, str]:
        """(passed | failed | timeout, seconds, output) of the tests in this copy."""
        keyword = " and ".join(f"not {k}" for k in DESELECT)
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
               "-k", keyword, *tests]
        began = time.monotonic()
        with tempfile.TemporaryFile(dir=self.tmp) as out:
            proc = subprocess.Popen(cmd, cwd=self.copy, env=_env(self.copy, self.tmp),
                                    stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            try:
                rc: int | None = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                rc = None
            finally:
                # the run's group: pytest and whatever it started and left behind
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                self._kill_leftovers()
            out.seek(0)
            output = out.read().decode(errors="replace")
        status = "timeout" if rc is None else "passed" if rc == 0 else "failed"
        return status, time.monotonic() - began, output

    def _kill_leftovers(self) -> None:
        """Kill what this copy's run started in sessions of its own (launcher's supervisors
        and workloads) and left running: a process whose environment carries this worker's
        mark, or whose command line or working directory is in its folder. Linux only."""
        where = str(self.copy.parent)
        mark = f"{MARK}={where}".encode()
        proc_dir = Path("/proc")
        if not proc_dir.is_dir():
            return
        for entry in proc_dir.iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                environ = (entry / "environ").read_bytes().split(b"\0")
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                    errors="replace")
                cwd = os.readlink(entry / "cwd")
            except OSError:
                continue  # gone, or not ours to read
            if mark in environ or f"{where}/" in cmdline or (cwd + "/").startswith(where + "/"):
                with contextlib.suppress(OSError):
                    os.kill(int(entry.name), signal.SIGKILL)

    def run_with(self, module: str, content: bytes, original: bytes, tests: list[str],
                 timeout: float) -> tuple[str, float, str]:
        path = self.copy / module
        try:
            path.write_bytes(content)
            self._drop_bytecode(module)
            return self.pytest(tests, timeout)
        finally:
            path.write_bytes(original)
            self._drop_bytecode(module)

    def imported_from(self, module: str) -> str:
        """Where a process started elsewhere with the tests' environment imports `module`
        from (as the `python -m launcher` subprocesses of the tests do)."""
        name = module.removesuffix(".py").replace("/", ".")
        code = f"import {name} as m; print(m.__file__)"
        proc = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True,
                              text=True, env=_env(self.copy, self.tmp), timeout=120)
        return proc.stdout.strip() or proc.stderr.strip()


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _tail(output: str, lines: int = 25) -> str:
    return "\n".join(output.rstrip().splitlines()[-lines:])


def select(module: str, mutants: list[Mutant], sample: int | None, seed: int) -> list[Mutant]:
    """At most `sample` of a module's mutants, the same ones for the same seed and source."""
    if sample is None or len(mutants) <= sample:
        return mutants
    chosen = random.Random(f"{seed}:{module}").sample(mutants, sample)
    return sorted(chosen, key=lambda m: (m.line, m.edits))


def run(modules: list[str], tests_for: dict[str, list[str]], jobs: int,
        operators: set[str] | None = None, sample: int | None = None,
        seed: int = 0) -> dict[str, object]:
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mut-") as temp:
        base = Path(temp) / "base"
        shutil.copytree(ROOT, base, symlinks=True, ignore=IGNORE)  # one snapshot for all
        originals = {m: (base / m).read_bytes() for m in modules}
        equivalent: dict[str, list[tuple[Mutant, str]]] = {m: [] for m in modules}
        mutants = {m: select(m, find_mutants(m, originals[m].decode(), operators,
                                             equivalent[m]), sample, seed)
                   for m in modules}
        matched = {(x.module, x.operator, originals[x.module].decode().splitlines()[
            x.line - 1].strip(), x.original) for v in equivalent.values() for x, _ in v}
        for key in EQUIVALENT:
            if key[0] in modules and (operators is None or key[1] in operators) and (
                    key not in matched):
                _progress(f"mutation: warning: EQUIVALENT's entry matches no mutant (stale?): "
                          f"{key}")
        total = sum(len(v) for v in mutants.values())
        _progress(f"mutation: {total} mutants in {len(modules)} modules, {jobs} jobs")
        workers: queue.Queue[Worker] = queue.Queue()
        for i in range(jobs):
            (Path(temp) / f"w{i}").mkdir()
            workers.put(Worker(base, Path(temp) / f"w{i}"))

        def on_worker(fn, *args):  # type: ignore[no-untyped-def]
            w = workers.get()
            try:
                return fn(w, *args)
            finally:
                workers.put(w)

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            # 1. the unmutated tests pass in a copy, and time them
            # (once per list of tests: modules mapped to the same tests share the clean run)
            # (tried up to CLEAN_TRIES times: an end-to-end test's timing that fails once on a
            # busy host would end the whole run, and a mutant's run is not retried anyway)
            lists = list(dict.fromkeys(tuple(tests_for[m]) for m in modules))

            def clean_run(w: Worker, tests: list[str]) -> tuple[str, float, str]:
                for attempt in range(1, CLEAN_TRIES + 1):
                    status, secs, output = w.pytest(tests, 1800.0)
                    if status == "passed" or attempt == CLEAN_TRIES:
                        return status, secs, output
                    _progress(f"clean: {' '.join(tests)}: {status} (try {attempt} of "
                              f"{CLEAN_TRIES}):\n{_tail(output, 4)}")
                raise AssertionError  # unreachable

            runs = dict(zip(lists, pool.map(
                lambda t: on_worker(clean_run, list(t)), lists), strict=True))
            clean = {m: runs[tuple(tests_for[m])] for m in modules}
            for m, (status, secs, output) in clean.items():
                _progress(f"clean: {m}: {status} in {secs:.1f}s")
                if status != "passed":
                    raise CleanRunFailed(f"the tests of {m} fail without any mutant "
                                         f"({' '.join(tests_for[m])}):\n{_tail(output)}")
            timeouts = {m: max(MIN_TIMEOUT_S, TIMEOUT_FACTOR * clean[m][1]) for m in modules}

            # 2. the copy is what the tests import, in process and in subprocesses
            for w in list(workers.queue):
                for m in modules:
                    where = w.imported_from(m)
                    if where != str(w.copy / m):
                        raise CleanRunFailed(f"{m} is imported from {where}, not from the "
                                             f"copy {w.copy}: PYTHONPATH does not win")
            canary = b"raise ImportError('mutation testing: canary, must be killed')\n"
            caught = dict(zip(modules, pool.map(lambda m: on_worker(
                lambda w: w.run_with(m, canary, originals[m], tests_for[m], timeouts[m])),
                modules), strict=True))
            for m, (status, _, output) in caught.items():
                if status == "passed":
                    raise CleanRunFailed(f"a module that cannot be imported passes the tests "
                                         f"of {m}: they do not import the copy\n{_tail(output)}")

            # 3. every mutant
            done = 0

            def one(mutant: Mutant) -> Result:
                nonlocal done
                content = mutant.apply(originals[mutant.module])
                status, secs, _ = on_worker(lambda w: w.run_with(
                    mutant.module, content, originals[mutant.module],
                    tests_for[mutant.module], timeouts[mutant.module]))
                result = Result(mutant, {"passed": "survived", "failed": "killed"}.get(
                    status, status), secs)
                done += 1
                _progress(f"[{done}/{total}] {result.status:8} {mutant.module}:{mutant.line}: "
                          f"{mutant.operator}: "
                          f"{_short(mutant.original)} -> {_short(mutant.mutated)} "
                          f"({secs:.1f}s)")
                return result

            results = list(pool.map(one, [x for m in modules for x in mutants[m]]))

    scores = {m: Score() for m in modules}
    for r in results:
        s = scores[r.mutant.module]
        s.mutants += 1
        if r.status == "survived":
            s.survived += 1
            source = originals[r.mutant.module].decode().splitlines()[r.mutant.line - 1]
            s.survivors.append({"path": r.mutant.module, "line": r.mutant.line,
                                "operator": r.mutant.operator,
                                "original": r.mutant.original, "mutated": r.mutant.mutated,
                                "source": source.strip()})
        else:
            s.killed += 1
            s.timeout += r.status == "timeout"
    killed = sum(s.killed for s in scores.values())
    return {
        "operators": sorted(operators or OPERATORS),
        "sample": sample, "seed": seed if sample is not None else None,
        "modules": {m: {**asdict(s), "score": round(s.score, 1),
                        "tests": tests_for[m], "timeout_s": round(timeouts[m], 1),
                        "equivalent": [{"line": x.line, "operator": x.operator,
                                        "original": x.original, "why": why}
                                       for x, why in equivalent[m]]}
                    for m, s in scores.items()},
        "total": {"mutants": total, "killed": killed, "survived": total - killed,
                  "score": round(100.0 * killed / total, 1) if total else 100.0},
        "wall_s": round(time.monotonic() - began, 1),
        "jobs": jobs,
        "deselected": DESELECT,
    }


class CleanRunFailed(Exception):
    pass


def _short(text: str, width: int = 60) -> str:
    one = " ".join(text.split())
    return one if len(one) <= width else one[: width - 3] + "..."


def _table(result: dict[str, object], survivors: bool) -> str:
    modules: dict[str, dict[str, object]] = result["modules"]  # type: ignore[assignment]
    total: dict[str, object] = result["total"]  # type: ignore[assignment]
    width = max(len(m) for m in [*modules, "module"])
    rows = [f"{'module':<{width}}  mutants  killed  timeout  survived   score"]
    for m, s in modules.items():
        rows.append(f"{m:<{width}}  {s['mutants']:>7}  {s['killed']:>6}  {s['timeout']:>7}  "
                    f"{s['survived']:>8}  {s['score']:>5.1f}%")
    rows.append(f"{'total':<{width}}  {total['mutants']:>7}  {total['killed']:>6}  "
                f"{'':>7}  {total['survived']:>8}  {total['score']:>5.1f}%")
    rows.append(f"wall time {result['wall_s']}s with {result['jobs']} jobs")
    left_out = [(m, x) for m, s in modules.items() for x in s["equivalent"]]  # type: ignore[attr-defined]
    if left_out:
        rows.append(f"left out as equivalent (EQUIVALENT): {len(left_out)}")
    if survivors:
        for s in modules.values():
            for x in s["survivors"]:  # type: ignore[attr-defined]
                rows.append(f"{x['path']}:{x['line']}: {x['operator']}: {_short(x['original'])} -> "
                            f"{_short(x['mutated'])}\n    {x['source']}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", metavar="MODULE",
                        help=f"source files to mutate (default: the {len(TESTS)} in TESTS)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="private copies run in parallel (default: the CPU count)")
    parser.add_argument("--tests", nargs="+", metavar="TEST",
                        help="test files (or pytest node ids) for every module given, "
                             "instead of the mapping")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--list-survivors", action="store_true",
                        help="list each surviving mutant with its source line")
    parser.add_argument("--core", action="store_true",
                        help=f"the {len(CORE)} core modules (CORE) instead of every one in TESTS")
    parser.add_argument("--operators", metavar="NAME,...",
                        help=f"only these kinds of mutant (default: all): {', '.join(OPERATORS)}")
    parser.add_argument("--sample", type=int, metavar="N",
                        help="at most N mutants per module, drawn at random with --seed")
    parser.add_argument("--seed", type=int, default=0,
                        help="the seed of --sample's draw (default: 0)")
    args = parser.parse_args(argv)
    operators = set(args.operators.split(",")) if args.operators else None
    if operators is not None and operators - set(OPERATORS):
        parser.error(f"unknown operator {sorted(operators - set(OPERATORS))[0]}; "
                     f"known: {', '.join(OPERATORS)}")
    if args.sample is not None and args.sample < 1:
        parser.error("--sample must be at least 1")
    modules = [str(Path(m)) for m in args.modules] or (CORE if args.core else list(TESTS))
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    for m in modules:
        if not m.endswith(".py") or not (ROOT / m).is_file():
            parser.error(f"{m}: not a Python file under {ROOT}")
        if not args.tests and m not in TESTS:
            parser.error(f"{m}: no tests mapped to it in TESTS; pass --tests")
    tests_for: dict[str, list[str]] = {}
    for m in modules:
        tests = args.tests or TESTS[m]
        present = [t for t in tests if (ROOT / t.partition("::")[0]).exists()]
        if args.tests and present != tests:
            parser.error(f"no such test file: {sorted(set(tests) - set(present))[0]}")
        if not present:
            parser.error(f"{m}: none of its test files exist")
        tests_for[m] = present
    try:
        result = run(modules, tests_for, args.jobs, operators, args.sample, args.seed)
    except CleanRunFailed as exc:
        print(f"mutation: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2) if args.json else _table(result, args.list_survivors))
    return 0


if __name__ == "__main__":
    sys.exit(main())
