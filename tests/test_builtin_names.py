"""No built-in is named outside its own module: what differs between entries is a capability on
what is loaded (`engine.inherits_environment`, `vendor.has_gpus`, `vendor.gpu_build`), never a
name tested elsewhere, and a setting's fallback entry is spelt once, in launcher/defaults.py.

A string equal to a built-in's entry name (pyproject.toml's entry-point groups) that is compared
(==, !=, in, a match case) or given as a default (a parameter's or a field's, `.get(key, X)`,
`flag(FLAG, X)`, `x or X`, `default=X`) fails here, outside the built-in's own module and
launcher/defaults.py. So does a built-in's module importing another built-in of its group
(podman's engine took docker's leftovers finder; both now take it from runtime/owner.py)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import ROOT
from tests.docker_helpers import launcher_imports  # the launcher modules a module imports

PACKAGE = ROOT / "launcher"
DEFAULTS = "launcher.defaults"

# Modules not yet rewritten, each with why (their literal -> the launcher.defaults name or the
# capability to use instead is in the note beside it).
ALLOWED_MODULES: dict[str, str] = {}  # none: every module takes launcher.defaults
# Literals that equal an entry name but name something else, each with why.
ALLOWED = {
    ("launcher.probe.cgroup_facts", "none"): "a cgroup version (no cgroup), not a vendor",
    ("launcher.runtime.podman_engine", "none"): "the word in a message: no controller found",
    ("launcher.runtime.podman_engine", "nvidia"): "Docker's device-request driver (the NVIDIA "
                                                  "container toolkit's), not the vendor entry",
}


def builtin_entries(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, dict[str, str]]:
    """group -> entry name -> its module, from the `launcher.*` entry-point groups."""
    out: dict[str, dict[str, str]] = {}
    group = None
    for line in pyproject.read_text().splitlines():
        head = re.match(r'^\[project\.entry-points\."(launcher\.[a-z_]+)"\]$', line)
        if head:
            group = head.group(1)
            out[group] = {}
        elif line.startswith("["):
            group = None
        elif group and "=" in line and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            out[group][name.strip().strip('"')] = value.strip().strip('"').split(":")[0]
    return out


def _owners() -> dict[str, set[str]]:
    """entry name -> the modules that define an entry of that name (`none` has two)."""
    out: dict[str, set[str]] = {}
    for entries in builtin_entries().values():
        for name, module in entries.items():
            out.setdefault(name, set()).add(module)
    return out


def _strings(node: ast.AST | None) -> list[ast.Constant]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [c for e in node.elts for c in _strings(e)]
    return []


def _tested_or_defaulted(tree: ast.AST) -> list[ast.Constant]:
    """The string literals compared or given as a default (never those in an f-string: text)."""
    in_text = {id(n) for j in ast.walk(tree) if isinstance(j, ast.JoinedStr)
               for n in ast.walk(j)}
    found: list[ast.Constant] = []
    for node in ast.walk(tree):
        if id(node) in in_text:
            continue
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                found += _strings(side)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            for d in (*node.args.defaults, *node.args.kw_defaults):
                found += _strings(d)
        elif isinstance(node, ast.AnnAssign):
            found += _strings(node.value)
        elif isinstance(node, ast.Call) and _called(node) in ("get", "pop", "setdefault",
                                                              "flag") and len(node.args) >= 2:
            found += _strings(node.args[1])  # a mapping's fallback, a flag's default
        elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            found += _strings(node.values[-1])
        elif isinstance(node, ast.MatchValue) or (isinstance(node, ast.keyword)
                                                  and node.arg == "default"):
            found += _strings(node.value)
    return found


def _called(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def named_builtins(modules: dict[str, Path],
                   owners: dict[str, set[str]]) -> list[tuple[str, int, str]]:
    """(module, line, name) of each built-in named outside its own module."""
    out = []
    for mod, path in modules.items():
        if mod == DEFAULTS or any(_within(mod, m) for m in ALLOWED_MODULES):
            continue
        for c in _tested_or_defaulted(ast.parse(path.read_text())):
            if c.value in owners and mod not in owners[c.value] and \
                    (mod, c.value) not in ALLOWED:
                out.append((mod, c.lineno, c.value))
    return sorted(out)


def _modules() -> dict[str, Path]:
    return {_module(p): p for p in sorted(PACKAGE.rglob("*.py")) if "_shipped" not in p.parts}


def test_no_builtin_is_named_outside_its_own_module():
    assert named_builtins(_modules(), _owners()) == []


def test_the_name_check_can_fail(tmp_path):
    leak = tmp_path / "leak.py"
    leak.write_text('def f(job, runtime="native", o={}):\n'
                    '    if job.backend == "local" or o.get("vendor", "none"):\n'
                    '        return job.runtime in ("docker", "podman") or "tf"\n'
                    '    return f"{job.backend or \'local\'}"  # text, not a test\n'
                    'target: str = flag(TARGET, "k8s")\n')
    assert [(n, v) for _, n, v in named_builtins({"launcher.jobs.leak": leak}, _owners())] == [
        (1, "native"), (2, "local"), (2, "none"), (3, "docker"), (3, "podman"), (3, "tf"),
        (5, "k8s")]
    # in its own module, or in the defaults, the same text passes
    assert named_builtins({"launcher.jobs.local": leak, DEFAULTS: leak},
                          {"local": {"launcher.jobs.local"}}) == []


def builtins_importing_builtins(modules: dict[str, Path],
                                entries: dict[str, dict[str, str]]) -> list[tuple[str, str]]:
    """(module, what it imports) where one built-in's module imports another of its group:
    what they share belongs in a module of neither."""
    out = []
    for group in entries.values():
        own = set(group.values())
        for mod in sorted(own & set(modules)):
            out += [(mod, imp) for imp in sorted(launcher_imports(modules[mod]))
                    if imp in own and imp != mod]
    return out


def test_no_builtin_imports_another_of_its_group():
    assert builtins_importing_builtins(_modules(), builtin_entries()) == []


def test_the_import_check_can_fail(tmp_path):
    podman = tmp_path / "podman.py"
    podman.write_text("from launcher.runtime.docker_engine import orphan_containers\n")
    entries = {"launcher.engines": {"docker": "launcher.runtime.docker_engine",
                                    "podman": "launcher.runtime.podman_engine"}}
    assert builtins_importing_builtins({"launcher.runtime.podman_engine": podman}, entries) == [
        ("launcher.runtime.podman_engine", "launcher.runtime.docker_engine")]
