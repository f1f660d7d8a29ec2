"""The framework a user's own Python script uses, read from what it imports: the script a command
runs is parsed (`ast`: nothing is imported or run), and so are the local modules it imports,
breadth-first, up to MAX_FILES files and MAX_BYTES in all. A file that cannot be read is passed
over; one that does not parse (newer syntax than this interpreter's) is scanned line by line.

Standard library only, and it never raises: a command it cannot read gives no framework."""

from __future__ import annotations

import ast
import contextlib
import os
import re
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

MAX_FILES = 50
MAX_BYTES = 2 << 20

def marking() -> dict[str, str]:
    """Top-level module -> the framework its import marks: each registered framework's
    `module` and `marks`, a plugin's too (none's numpy marks nothing)."""
    from launcher import frameworks

    out: dict[str, str] = {}
    for name in frameworks.names():
        fw = frameworks.get(name)
        for mod in (fw.module, *fw.marks) if fw.needed else ():
            out.setdefault(mod, name)
    return out


# "keras" follows KERAS_BACKEND
WEAK = {"transformers": "torch"}  # its backend is torch unless the script imports another
KERAS_BACKENDS = {"tensorflow": "tf", "jax": "jax", "torch": "torch"}  # Keras 3's, tf unset
PYTHON = re.compile(r"python(\d+(\.\d+)?)?t?")
OPTIONS_WITH_VALUE = set("cmWX")  # -c CODE, -m MODULE, -W ARG, -X OPT
Backend = Tuple[Optional[str], Optional[str]]  # KERAS_BACKEND set in os.environ, and setdefault
LINE_IMPORT = re.compile(r"^\s*(?:from\s+(\.*[\w.]*)\s+import\s+([\w.*]+)|import\s+([\w.]+))",
                         re.M)


@dataclass(frozen=True)
class Detected:
    framework: str | None  # torch, tf, jax; None: no Python script, or none imported
    where: str = ""  # "train.py:3 (import torch)", and who imported a local module
    found: tuple[str, ...] = ()  # every framework imported, the chosen one first
    script: str | None = None  # the Python file the command runs, as shown in `where`


@dataclass(frozen=True)
class _Import:
    line: int
    text: str  # the statement, shortened: "from torch.utils.data import DataLoader"
    module: str  # "torch.utils.data" ("" for `from . import x`)
    names: tuple[str, ...]  # what a from-import names (maybe submodules)
    level: int  # the dots of a relative import
    top: bool  # at module level, not inside a function


@dataclass(frozen=True)
class _Hit:
    rank: tuple[int, bool, int]  # file order, inside a function, line
    framework: str
    where: str
    weak: bool


def detect(command: Sequence[str], cwd: str | Path, env: Mapping[str, str] | None = None, *,
           max_files: int = MAX_FILES, max_bytes: int = MAX_BYTES) -> Detected:
    """The framework the Python script of `command` imports, run in `cwd`; `env` is the
    environment it runs with (KERAS_BACKEND)."""
    cwd = Path(cwd)
    env = os.environ if env is None else env
    target = script_of(command, cwd)
    if isinstance(target, Detected):
        return target
    if target is None:
        return Detected(None)
    return _scan(target.resolve(), cwd, env, max_files, max_bytes)


def script_of(command: Sequence[str], cwd: Path) -> Path | Detected | None:
    """The Python file `command` runs (a `-m` module resolved under `cwd`); a Detected when the
    command itself names a framework (`python -m torch.distributed.run`, `torchrun`); None
    when it runs no Python file launcher can read (`-c`, stdin, `bash run.sh`, a binary)."""
    args = list(command)
    if args and Path(args[0]).name == "env":  # env [-i] [NAME=VALUE]... python3 ...
        args = args[1:]
        while args and (args[0].startswith("-") or "=" in args[0]):
            args = args[1:]
    if not args:
        return None
    prog = Path(args[0]).name
    if prog == "torchrun":
        return Detected("torch", "the command (torchrun)", ("torch",))
    if not PYTHON.fullmatch(prog):
        path = cwd / args[0]
        return path if "/" in args[0] and _python_shebang(path) else None
    rest = args[1:]
    while rest and rest[0].startswith("-") and rest[0] != "-":
        opt = rest.pop(0)
        if opt.startswith("--"):  # --check-hash-based-pycs MODE; --help, --version run nothing
            if opt == "--check-hash-based-pycs" and rest:
                rest.pop(0)
            continue
        for i, ch in enumerate(opt[1:], 1):
            if ch in OPTIONS_WITH_VALUE:
                value = opt[i + 1:] or (rest.pop(0) if rest else "")
                if ch == "m":
                    return _module(value, cwd)
                if ch == "c":
                    return None
                break
    if not rest or rest[0] == "-":
        return None
    return cwd / rest[0]


def _module(name: str, cwd: Path) -> Path | Detected | None:
    parts = name.split(".")
    base = cwd.joinpath(*parts)
    for path in (base.with_name(base.name + ".py"), base / "__main__.py"):
        if path.is_file():
            return path
    fw = marking().get(parts[0])
    return Detected(fw, f"the command (-m {name})", (fw,)) if fw else None


def _python_shebang(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            first = f.readline(256)
    except OSError:
        return False
    if not first.startswith(b"#!"):
        return False
    words = first[2:].decode(errors="replace").split()
    if words and Path(words[0]).name == "env":
        words = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    return bool(words) and PYTHON.fullmatch(Path(words[0]).name) is not None


def _scan(script: Path, cwd: Path, env: Mapping[str, str], max_files: int,
          max_bytes: int) -> Detected:
    """Breadth-first from the script through the local modules it imports."""
    roots = list(dict.fromkeys([script.parent, cwd]))  # where `import x` finds a local x
    queue: deque[Path] = deque([script])
    by: dict[Path, tuple[Path, int] | None] = {script: None}  # who imported each, at what line
    hits: list[_Hit] = []
    keras_backend = env.get("KERAS_BACKEND")  # the script's own assignment wins over it
    read, total = 0, 0
    while queue and read < max_files:
        path = queue.popleft()
        try:
            size = path.stat().st_size
            if total + size > max_bytes:
                continue
            source = path.read_bytes()
        except OSError:
            continue
        read, total = read + 1, total + len(source)
        imports, (assigned, default) = _imports(source)
        keras_backend = assigned or keras_backend or default
        for imp in imports:
            hit = _framework(imp, keras_backend)
            if hit is not None:
                fw, weak, said = hit
                hits.append(_Hit((read, not imp.top, imp.line), fw,
                                 _where(path, imp.line, said, by, cwd), weak))
            for local in _locals(imp, path, roots):
                if local not in by:
                    by[local] = (path, imp.line)
                    queue.append(local)
    strong = sorted((h for h in hits if not h.weak), key=lambda h: h.rank)
    chosen = strong or sorted(hits, key=lambda h: h.rank)
    shown = _shown(script, cwd)
    if not chosen:
        return Detected(None, script=shown)
    found = tuple(dict.fromkeys(h.framework for h in chosen))
    return Detected(chosen[0].framework, chosen[0].where, found, shown)


def _imports(source: bytes) -> tuple[list[_Import], Backend]:
    """The imports of a file (not those under `if TYPE_CHECKING:`), and the KERAS_BACKEND it
    sets in os.environ; a file that does not parse: its import lines, read one by one."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return _import_lines(source), (None, None)
    out: list[_Import] = []
    backend: dict[str, str] = {}

    def visit(node: ast.AST, top: bool) -> None:
        if isinstance(node, ast.Import):
            out.extend(_Import(node.lineno, f"import {_alias(a)}", a.name, (), 0, top)
                       for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            more = ", ..." if len(node.names) > 1 else ""
            text = f"from {'.' * node.level}{module} import {_alias(node.names[0])}{more}"
            out.append(_Import(node.lineno, text, module, tuple(a.name for a in node.names),
                               node.level, top))
        elif isinstance(node, (ast.Assign, ast.Expr)):
            for how, value in _keras_backend(node):
                backend.setdefault(how, value)
            return
        if isinstance(node, ast.If) and _type_checking(node.test):
            children: list[ast.AST] = list(node.orelse)
        else:
            children = [c for c in ast.iter_child_nodes(node) if not isinstance(c, ast.expr)]
        inner = top and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for child in children:
            visit(child, inner)

    with contextlib.suppress(RecursionError):  # nesting deeper than the stack: what was seen
        visit(tree, True)
    return out, (backend.get("set"), backend.get("setdefault"))


def _import_lines(source: bytes) -> list[_Import]:
    code = source.decode(errors="replace")
    out = []
    for m in LINE_IMPORT.finditer(code):
        line = code.count("\n", 0, m.start()) + 1
        frm, name, plain = m.groups()
        if plain:
            out.append(_Import(line, f"import {plain}", plain, (), 0, True))
        else:
            dots = len(frm) - len(frm.lstrip("."))
            out.append(_Import(line, f"from {frm} import {name}", frm.lstrip("."), (name,),
                               dots, True))
    return out


def _alias(a: ast.alias) -> str:
    return a.name + (f" as {a.asname}" if a.asname else "")


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _keras_backend(node: ast.Assign | ast.Expr) -> list[tuple[str, str]]:
    """("set", "jax") for `os.environ["KERAS_BACKEND"] = "jax"`, ("setdefault", "jax") for
    `os.environ.setdefault("KERAS_BACKEND", "jax")`."""
    if isinstance(node, ast.Assign):
        target = node.targets[0]
        if isinstance(target, ast.Subscript) and _constant(target.slice) == "KERAS_BACKEND":
            v = _constant(node.value)
            return [("set", v)] if v else []
    elif isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute) \
            and node.value.func.attr == "setdefault" and len(node.value.args) == 2 \
            and _constant(node.value.args[0]) == "KERAS_BACKEND":
        v = _constant(node.value.args[1])
        return [("setdefault", v)] if v else []
    return []


def _constant(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _framework(imp: _Import, keras_backend: str | None) -> tuple[str, bool, str] | None:
    """The framework an import loads, whether that is only a guess, and the import in words."""
    if imp.level:
        return None
    top = imp.module.partition(".")[0]
    if top == "keras":
        fw = KERAS_BACKENDS.get(keras_backend or "tensorflow")
        said = f"{imp.text}; KERAS_BACKEND={keras_backend}" if keras_backend else imp.text
        return (fw, False, said) if fw else None
    fw = marking().get(top)
    if fw is not None:
        return fw, False, imp.text
    return (WEAK[top], True, imp.text) if top in WEAK else None


def _locals(imp: _Import, path: Path, roots: list[Path]) -> list[Path]:
    """The local files an import runs: each package's __init__.py on the way, the module, and
    the submodules a from-import may name."""
    if imp.level:
        base = path.parent
        for _ in range(imp.level - 1):
            base = base.parent
        bases = [base]
    else:
        bases = roots
    parts = imp.module.split(".") if imp.module else []
    wanted = [parts + [n] for n in imp.names if n != "*"] or [parts]
    found: list[Path] = []
    for base in bases:
        for dotted in wanted:
            for i in range(1, len(dotted) + 1):
                p = base.joinpath(*dotted[:i])
                here = [f for f in (p.with_name(p.name + ".py"), p / "__init__.py")
                        if f.is_file()]
                if not here:
                    break
                found += [f.resolve() for f in here]
    return list(dict.fromkeys(found))


def _where(path: Path, line: int, said: str, by: dict[Path, tuple[Path, int] | None],
           cwd: Path) -> str:
    """"mylib/model.py:1 (from tensorflow import keras), imported by train.py:5"."""
    words = f"{_shown(path, cwd)}:{line} ({said})"
    chain = []
    step = by.get(path)
    while step is not None and len(chain) < 5:
        chain.append(f"{_shown(step[0], cwd)}:{step[1]}")
        step = by.get(step[0])
    return words + (f", imported by {' <- '.join(chain)}" if chain else "")


def _shown(path: Path, cwd: Path) -> str:
    try:
        return str(path.resolve().relative_to(cwd.resolve()))
    except (ValueError, OSError):
        return str(path)
