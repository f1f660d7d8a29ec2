"""The structure holds: the lower layers import no policy, only cli/ prints or exits, and no
module imports itself back through others."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT
from tests.docker_helpers import launcher_imports

PACKAGE = ROOT / "launcher"
# Reading the host, profiles and the leaves: nothing from the layers above.
LOWER = ("launcher.probe", "launcher.profiles", "launcher.units", "launcher.errors",
         "launcher.variables", "launcher.vendors", "launcher.frameworks", "launcher.registry",
         "launcher.dists",
         "launcher.shipped")
UPPER = ("launcher.caps", "launcher.render", "launcher.runtime", "launcher.cli")


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "_shipped" in path.parts:
            continue
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_lower_layers_import_no_policy():
    bad = [(mod, imp) for mod, path in _modules().items() if _within(mod, LOWER)
           for imp in launcher_imports(path) if _within(imp, UPPER)]
    assert bad == []


def test_the_layer_check_can_fail(tmp_path):
    leak = tmp_path / "leak.py"
    leak.write_text("def f():\n    from launcher.caps.compute import compute_caps\n")
    assert any(_within(i, UPPER) for i in launcher_imports(leak))


def _prints_or_exits(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else (
                f"{f.value.id}.{f.attr}" if isinstance(f, ast.Attribute) and
                isinstance(f.value, ast.Name) else "")
            if name in ("print", "exit", "quit", "sys.exit", "os._exit") or (
                    isinstance(f, ast.Attribute) and f.attr == "write" and
                    isinstance(f.value, ast.Attribute) and f.value.attr in ("stdout",
                                                                             "stderr")):
                found.append(f"{path.name}:{node.lineno}: {name or f.attr}")
        elif isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name) and exc.id == "SystemExit":
                found.append(f"{path.name}:{node.lineno}: SystemExit")
    return found


def _is_program(mod: str) -> bool:
    """Programs that run in their own process: `python -m` entry points, the supervisor in
    images, and the workloads launcher starts. They own their output."""
    return (mod.endswith(".__main__") or _within(mod, ("launcher.workloads",))
            or mod in ("launcher.supervise.entrypoint", "launcher.supervise.run",
                       "launcher.supervise.spawn"))


def test_only_cli_prints_or_exits():
    bad = [hit for mod, path in _modules().items()
           if not _within(mod, ("launcher.cli",)) and not _is_program(mod)
           for hit in _prints_or_exits(path)]
    assert bad == []


def test_the_print_check_can_fail(tmp_path):
    noisy = tmp_path / "noisy.py"
    noisy.write_text("import sys\nprint('x')\nsys.stderr.write('y')\nraise SystemExit(2)\n")
    assert len(_prints_or_exits(noisy)) == 3


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    graph = {}
    for mod, path in mods.items():
        # an import of a package's attribute names the package; parents import nothing here
        graph[mod] = {i if i in mods else i.rsplit(".", 1)[0]
                      for i in launcher_imports(path)} & set(mods) - {mod}
    return graph


def test_no_import_cycle():
    assert _cycles(_graph()) == []


def test_the_cycle_check_can_fail():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _shipped_in_image(module: str) -> bool:
    from launcher.render.dockerfile import IMAGE_MODULES

    top = module.split(".")[1] if "." in module else "__init__"
    return f"{top}.py" in IMAGE_MODULES or top in IMAGE_MODULES


def _reach(starts: list[str]) -> set[str]:
    mods = _modules()
    seen, todo = set(), list(starts)
    while todo:
        name = todo.pop()
        if name in seen or name not in mods:
            continue
        seen.add(name)
        todo += sorted(launcher_imports(mods[name]))
    return seen


def test_an_image_holds_everything_its_supervisor_imports():
    # the entrypoint and the image-build steps (calibrate) run from the copied subset only
    starts = [m for m in _modules() if m.startswith("launcher.supervise")] + [
        "launcher.workloads.calibrate", "launcher.probe.__main__"]
    missing = sorted(m for m in _reach(starts) if not _shipped_in_image(m))
    assert missing == []


# The supervisor is a user of the cgroup and process primitives, never their home: the engines
# and the cgroup code take them from cgroups/ and the neutral modules (proctree, rlimits), so no
# arrow runs from them back into supervise/ (the same rank, so the rank check cannot see it).
SUPERVISOR_USERS = ("launcher.cgroups", "launcher.runtime")


def _reach_into_supervise(modules: dict[str, Path]) -> list[tuple[str, str]]:
    return sorted((mod, imp) for mod, path in modules.items() if _within(mod, SUPERVISOR_USERS)
                  for imp in launcher_imports(path) if _within(imp, ("launcher.supervise",)))


def test_cgroups_and_runtime_import_nothing_from_supervise():
    assert _reach_into_supervise(_modules()) == []


def test_the_supervise_check_can_fail(tmp_path):
    back = tmp_path / "back.py"
    back.write_text("from launcher.supervise.lifeline import stop_tree\n")
    assert ("launcher.cgroups.back", "launcher.supervise.lifeline") in _reach_into_supervise(
        {"launcher.cgroups.back": back})

# Every package and top-level module of launcher, lowest first: a module imports only from its
# own rank or below. A new package must be given a rank here (the test says so).
RANKS = {
    "launcher": 0, "__version__": 0, "errors": 0, "units": 0, "glibc": 0, "kernel": 0, "cpulist": 0,
    "names": 0, "proctree": 0, "rlimits": 0,
    "shipped": 0, "dists": 0, "contract": 0, "keys": 0, "threadpools": 0, "flags": 0, "checks": 0,
    "commands": 0, "defaults": 0,
    "registry": 1,
    "vendors": 2, "frameworks": 2,
    "variables": 3,
    "probe": 4, "profiles": 4,
    "caps": 5,
    "supervise": 6, "telemetry": 6, "workloads": 6, "cgroups": 6,
    "runtime": 7, "render": 7,
    "jobs": 8,
    "usecases": 9,
    "cli": 10,
    "__main__": 11,
}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "launcher"


def _upward(modules: dict[str, Path]) -> list[tuple[str, str]]:
    return [(mod, imp) for mod, path in modules.items() for imp in launcher_imports(path)
            if RANKS.get(_package(imp), 99) > RANKS.get(_package(mod), -1)]


def test_every_package_has_a_rank_and_no_import_runs_up():
    mods = _modules()
    assert sorted({_package(m) for m in mods} - set(RANKS)) == []
    assert _upward(mods) == []


def test_the_rank_check_can_fail(tmp_path):
    up = tmp_path / "up.py"
    up.write_text("from launcher.cli.common import resolve_profile\n")
    assert ("launcher.jobs.up", "launcher.cli.common") in _upward({"launcher.jobs.up": up})


# The command line parses and prints, nothing more: what a command does is a use case
# (launcher/usecases/). So cli/ imports from launcher only its own modules, the use cases, the
# errors and the units; the use cases hand on whatever else it shows (a type, a formatting
# helper such as the job summary's lines). Orchestration moved back into cli/ would need the
# engines, the jobs, the renderers, the probe or the caps again, and fails here.
CLI_MAY_IMPORT = ("launcher.cli", "launcher.usecases", "launcher.errors", "launcher.units",
                  "launcher.__version__", "launcher.flags")  # flags: the declarations it parses


def _cli_reaches_below(modules: dict[str, Path]) -> list[tuple[str, str]]:
    return sorted((mod, imp) for mod, path in modules.items() if _within(mod, ("launcher.cli",))
                  for imp in launcher_imports(path)
                  if imp != "launcher" and not _within(imp, CLI_MAY_IMPORT))


def test_the_cli_only_parses_and_prints():
    assert _cli_reaches_below(_modules()) == []


def test_the_cli_check_can_fail(tmp_path):
    busy = tmp_path / "busy.py"
    busy.write_text("def run():\n    from launcher.runtime.engines import choose_engine\n"
                    "    from launcher.jobs.job import prepare\n")
    assert _cli_reaches_below({"launcher.cli.busy": busy}) == [
        ("launcher.cli.busy", "launcher.jobs.job"),
        ("launcher.cli.busy", "launcher.jobs.job.prepare"),
        ("launcher.cli.busy", "launcher.runtime.engines"),
        ("launcher.cli.busy", "launcher.runtime.engines.choose_engine")]


def _many_positional(source: str, limit: int = 5) -> list[str]:
    """Functions taking more than `limit` values positionally (self and cls not counted)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names = [a.arg for a in (*node.args.posonlyargs, *node.args.args)
                     if a.arg not in ("self", "cls")]
            if len(names) > limit:
                out.append(f"{node.name} ({len(names)})")
    return out


def test_a_call_of_more_than_five_values_names_them():
    """More than five values go by keyword (or in a small dataclass), so no call can swap two;
    at most five functions are allowed the exception (none takes it today)."""
    found = [f"{p.relative_to(ROOT)}: {f}" for p in sorted((ROOT / "launcher").rglob("*.py"))
             for f in _many_positional(p.read_text())]
    assert len(found) <= 5, found
    assert _many_positional("def f(a, b, c, d, e, g): pass\n") == ["f (6)"]  # it can fail
    assert _many_positional("def f(a, b, *, c, d, e, g): pass\n") == []
