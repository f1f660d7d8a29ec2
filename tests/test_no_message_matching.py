"""Decisions are made on data, never by reading words back: no substring test, startswith or
replace on a message (a reason, a source, a note, str(exc)...). What a message says is for
people; what code decides on travels beside it (a kind, an origin, a flag, a parameter).

The check reads launcher/ as the test_layers checks do, by its syntax: a value is taken for a
message by its name, so a genuine parse of another program's text (a /proc file, a cgroup file,
a daemon's error) is allowed below, each by its file and expression, with why."""

from __future__ import annotations

import ast

from tests.conftest import ROOT

# names that hold words for people
WORDS = {"msg", "message", "messages", "reason", "reasons", "text", "line", "lines", "note",
         "notes", "warning", "warnings", "why", "source", "said", "shortfall", "sentence",
         "binding"}
SUFFIXES = tuple(f"_{w}" for w in ("msg", "message", "reason", "text", "line", "note",
                                   "warning", "why", "source"))
EXCEPTIONS = {"exc", "e", "err", "error", "ex"}  # str() of these is an error's message
TESTS = {"startswith", "endswith", "replace", "find", "rfind", "index", "count", "removeprefix",
         "removesuffix", "partition", "rpartition"}
CHAINS = {"strip", "lstrip", "rstrip", "lower", "upper", "casefold"}
REGEX = {"search", "match", "fullmatch", "findall"}

# Text that is not ours: read from another program or a file, where its words are the data.
ALLOWED = {
    # the cycle unit's own word as the workload's first cycle line printed it (its case kept)
    ("launcher/supervise/reading.py", "line.lower().find(unit)"),
    # the cgroup facts' controller -> the path whose limit binds (a dict, not words)
    ("launcher/caps/budget.py", "'pids' in cg.binding"),
    # /proc/<pid>/cgroup, /proc/self/limits, /proc/<pid>/status: the kernel's own format
    ("launcher/jobs/memory.py", "line.startswith('0::')"),
    ("launcher/runtime/podman_engine.py", "line.startswith('0::')"),
    ("launcher/probe/limits.py", "line.startswith(row)"),
    ("launcher/telemetry/sampler.py", "line.startswith(row)"),
    # key/value files read line by line: /proc/<pid>/status, /proc/self/limits, cgroup
    # memory.stat and memory.events, the kernel's GPU information, an HTTP header, amd-smi's
    # output, a config file's section
    ("launcher/kernel.py", "line.partition(':')"),
    ("launcher/supervise/evidence.py", "line.partition(':')"),
    ("launcher/probe/limits.py", "line.partition(':')"),
    ("launcher/probe/cgroup.py", "line.partition(' ')"),
    ("launcher/supervise/diagnose.py", "line.partition(' ')"),
    ("launcher/telemetry/sampler.py", "line.partition(b' ')"),
    ("launcher/vendors/nvidia.py", "line.partition(':')"),
    ("launcher/runtime/docker_api.py", "line.partition(':')"),
    ("launcher/vendors/amd.py", "line.partition(' ')"),
    ("launcher/dists.py", "line.partition('=')"),
    # a config file's comments (pip.conf and the like)
    ("launcher/dists.py", "line.lstrip().startswith(('#', ';'))"),
    # the YAML source a profile error points into: a tab is a YAML mistake
    ("launcher/profiles/yamlsrc.py", "'\\t' in lines[at]"),
    ("launcher/profiles/yamlsrc.py", "lines[at].index('\\t')"),
    # a value from a profile checked before it goes into an image (no newline, no option)
    ("launcher/profiles/image_keys.py", "'\\n' in text"),
    ("launcher/profiles/image_keys.py", "'\\r' in text"),
    ("launcher/profiles/image_keys.py", "text.lstrip().startswith('-')"),
    # a path shown as the user would type it
    ("launcher/profiles/writer.py", "text.startswith('.')"),
    # pyproject-style section headers read from a file
    ("launcher/render/dockerfile.py", "line.startswith('[launcher.')"),
    ("launcher/render/dockerfile.py", "line.strip().endswith(']')"),
    # an example file's header comment
    ("launcher/usecases/examples.py", "line.startswith('# ')"),
    ("launcher/usecases/examples.py", "'usage' not in line.lower()"),
    # a rendered manifest line that must stay on one line
    ("launcher/render/k8s.py", "'\\n' not in line"),
    # the Docker daemon's and Podman's own error texts (they carry no code to read instead)
    ("launcher/runtime/docker_api.py", "'Permission denied' in str(exc)"),
    ("launcher/runtime/docker_engine.py", "'already in progress' in str(exc)"),
    ("launcher/runtime/docker_engine.py", "msg.startswith('permission denied')"),
    ("launcher/runtime/docker_engine.py", "'error' in msg"),
    ("launcher/runtime/podman_engine.py", "'image not known' in str(exc)"),
    ("launcher/runtime/podman_engine.py", "line.removeprefix('Error:')"),
    ("launcher/runtime/podman_engine.py", "x.startswith('Error:')"),
    # the lines a `launcher` child process printed: its own prefix marks what it said
    ("launcher/jobs/runner.py", "line.startswith('launcher: ')"),
}


def _wordy(node: ast.AST, bound: set[str]) -> bool:
    """Whether `node` holds a message: by its name, as str(exc), or a part of one."""
    if isinstance(node, ast.Name):
        return node.id in WORDS or node.id.endswith(SUFFIXES) or node.id in bound
    if isinstance(node, ast.Attribute):
        return node.attr in WORDS or node.attr.endswith(SUFFIXES)
    if isinstance(node, ast.Subscript):
        return _wordy(node.value, bound)
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Name) and f.id == "str" and len(node.args) == 1:
            arg = node.args[0]
            return isinstance(arg, ast.Name) and arg.id in EXCEPTIONS or _wordy(arg, bound)
        if isinstance(f, ast.Attribute) and f.attr in CHAINS:
            return _wordy(f.value, bound)
    return False


def _words_bound(tree: ast.AST) -> set[str]:
    """Loop variables that walk a message's parts or a list of messages (`for x in reasons`)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.For | ast.comprehension) and isinstance(node.target, ast.Name)
                and _wordy(node.iter, set())):
            out.add(node.target.id)
    return out


def _pattern(node: ast.AST) -> bool:
    """A literal or a constant's name: what a substring test looks for."""
    return (isinstance(node, ast.Constant) and isinstance(node.value, str)
            or isinstance(node, ast.JoinedStr)
            or isinstance(node, ast.Name) and node.id.isupper())


def matches_on_messages(source: str) -> list[tuple[int, str]]:
    """(line, expression) for each decision made by reading a message's words."""
    tree = ast.parse(source)
    bound = _words_bound(tree)
    found = []
    for node in ast.walk(tree):
        hit = False
        if isinstance(node, ast.Compare):
            hit = (any(isinstance(op, ast.In | ast.NotIn) for op in node.ops)
                   and _pattern(node.left)
                   and any(_wordy(c, bound) for c in node.comparators))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            hit = (f.attr in TESTS and _wordy(f.value, bound)) or (
                f.attr in REGEX and isinstance(f.value, ast.Name) and f.value.id == "re"
                and len(node.args) > 1 and _wordy(node.args[1], bound))
        if hit:
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_no_decision_reads_a_message():
    bad = []
    for path in sorted((ROOT / "launcher").rglob("*.py")):
        if "_shipped" in path.parts:
            continue
        rel = str(path.relative_to(ROOT))
        bad += [f"{rel}:{line}: {expr}" for line, expr in matches_on_messages(path.read_text())
                if (rel, expr) not in ALLOWED]
    assert bad == []


def test_every_allowance_is_still_needed():
    """An allowance whose expression is gone goes too, so none outlives its reason."""
    found = set()
    for path in sorted((ROOT / "launcher").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        found |= {(rel, expr) for _, expr in matches_on_messages(path.read_text())}
    assert sorted(ALLOWED - found) == []


def test_the_message_check_can_fail():
    snippet = (
        "def f(r, exc, u, why, FIX, by):\n"
        "    if 'lowered' in u.source:\n"  # an origin read from words
        "        pass\n"
        "    if 'not found' in str(exc):\n"  # an error told apart by its message
        "        pass\n"
        "    keep = [x for x in r.reasons if not x.startswith(GPU_SHORT)]\n"
        "    said = why.replace('--fit', by)\n"  # a message reworded after it was made
        "    if r.budget.binding.startswith('pids limit'):\n"
        "        pass\n"
        "    return keep, said, FIX in why\n")
    assert sorted(line for line, _ in matches_on_messages(snippet)) == [2, 4, 6, 7, 8, 10]
    assert matches_on_messages("def f(advisory, name):\n    return 'pids' in advisory\n") == []
