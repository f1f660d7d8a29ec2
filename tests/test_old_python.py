"""An image's python3 runs the supervisor (issue 44): 3.8 and 3.9 (Ubuntu 20.04's, many CUDA
images') run it with its watch and run record; 3.7 runs its caps part and refuses the watch in
one line that names the version.

The proof is the real interpreters (pyenv's, on this kind of machine): the image's
/opt/launcher is made as `launcher build` makes it (copy_package, entrypoint.py beside, psutil
from launcher's own Python beside the package), the build's steps that run the image's python3
run (calibrate, --record-base-env, compileall), then the supervisor starts as the image's
ENTRYPOINT does (`python3 -I -S /opt/launcher/entrypoint.py CMD`, caps.json resolved where it
starts) around a workload that leaks open files under RLIMIT_NOFILE 256. A missing interpreter
skips here, and fails under CI (CI machines have them).

A static guard beside it: the image modules hold none of the constructs that need a newer
Python at run time, and ruff holds them to 3.8's language (pyproject.toml).
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, need

LEAK = ROOT / "examples/growth/leak.py"
PROFILE = "name: old\nextends: base\nlimits: {nofile: 256}\n"
NOTE = ("launcher: note: growth is not watched here: this image's python3 is {v}; the watch "
        "needs 3.8 or newer")


def interpreter(version: str) -> str:
    """pyenv's python3 of that minor version, else python3.X on PATH; skipped where absent,
    a failure under CI."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    found = sorted(root.glob(f"versions/{version}.*/bin/python3"),
                   key=lambda p: int(p.parts[-3].split(".")[2]))
    if found:
        return str(found[-1])
    on_path = shutil.which(f"python{version}")  # a pyenv shim is there, and fails: it must run
    if on_path and subprocess.run([on_path, "-c", ""], capture_output=True).returncode == 0:
        return on_path
    need(f"python{version}", f"no python{version} here (pyenv install {version})")
    raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An image's /opt/launcher and /etc/launcher/caps.json, as `launcher build` makes them."""
    from launcher.caps.resolve import resolve
    from launcher.probe import probe_host
    from launcher.profiles import load_profile
    from launcher.render.dockerfile import PLUGINS, copy_package

    work = tmp_path_factory.mktemp("image")
    copy_package(work / "context")
    opt = work / "opt"
    shutil.copytree(work / "context" / "launcher", opt / "launcher")
    shutil.copytree(work / "context" / PLUGINS, opt, dirs_exist_ok=True)  # COPY plugins/ opt
    shutil.copy2(ROOT / "launcher/supervise/entrypoint.py", opt / "entrypoint.py")
    assert (opt / "psutil").is_dir()  # the watch's need, beside the package
    (work / "old.yaml").write_text(PROFILE)
    recipe = resolve(load_profile(work / "old.yaml"), probe_host("/", environ={})).recipe()
    (work / "caps.json").write_text(json.dumps({"recipe": recipe}))
    shutil.copy(LEAK, work / "leak.py")
    return work


def _env(image: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("LAUNCHER_") and k not in ("PYTHONPATH", "OMP_NUM_THREADS")}
    return {**env, "LAUNCHER_CAPS": str(image / "caps.json"), **more}


def supervise(python: str, image: Path, *cmd: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The image's ENTRYPOINT around CMD, under that python3; with LAUNCHER_WATCH_STDIN=1 its
    stdin a pipe held open until it ends, as `launcher run` holds it (its lifeline)."""
    import tempfile

    argv = [python, "-I", "-S", str(image / "opt/entrypoint.py"), *cmd]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(argv, env=_env(image, **env), cwd=image, stdout=out, stderr=err,
                                stdin=subprocess.PIPE, text=True)
        try:
            rc = proc.wait(timeout=180)
        finally:
            proc.kill()
            proc.stdin.close()  # type: ignore[union-attr]
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(argv, rc, out.read(), err.read())


def build_steps(python: str, image: Path) -> None:
    """The Dockerfile's steps that run the image's python3 (images/Dockerfile.base)."""
    opt = image / "opt"
    steps = [
        ([python, "-m", "launcher.workloads.calibrate", "--best-effort", "--out",
          str(image / "calibration.json")], {"PYTHONPATH": str(opt)}),
        ([python, "-I", "-S", str(opt / "entrypoint.py"), "--record-base-env",
          str(image / "base-env.json")], {}),
        ([python, "-m", "compileall", "-q", str(opt)], {}),
    ]
    for argv, env in steps:
        done = subprocess.run(argv, env=_env(image, **env), capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-2000:])


@pytest.mark.parametrize("version", ["3.8", "3.9"])
def test_the_supervisor_watches_under_an_images_python(version, image, tmp_path):
    python = interpreter(version)
    build_steps(python, image)
    record = tmp_path / "record"
    proc = supervise(python, image, python, "leak.py", "--files", "4", "--cycles", "300",
                     "--seconds", "0.1", LAUNCHER_RECORD_DIR=str(record))
    out = proc.stdout + proc.stderr
    assert "cycle 5/300" in proc.stdout, out[-3000:]  # the workload ran
    assert "Too many open files" in proc.stderr, out[-3000:]  # under RLIMIT_NOFILE 256
    assert proc.returncode == 1, (proc.returncode, out[-3000:])  # the workload's own status
    assert "launcher/" not in proc.stderr, out[-3000:]  # no traceback of the supervisor's
    assert "growth is not watched" not in out and "TypeError" not in out, out[-3000:]
    said = [ln for ln in out.splitlines() if ln.startswith("launcher: growth: ")]
    assert said and "open files +4 per cycle" in said[0] and "RLIMIT_NOFILE 256" in said[0], out
    summary = json.loads((record / "summary.json").read_text())
    assert summary["exit_status"] == 1, summary
    assert any(t["series"] == "files" and t["grows"] for t in summary["growth"]["trends"])
    rows = (record / "telemetry.jsonl").read_text().splitlines()
    assert len(rows) >= 3 and all(json.loads(r) for r in rows)


@pytest.mark.parametrize("version", ["3.8"])
def test_without_psutil_the_words_and_the_record_remain(version, image, tmp_path):
    """An image whose python3 cannot import psutil (one built by hand): the workload runs
    with its caps, the note names psutil, the record has no samples."""
    python = interpreter(version)
    bare = tmp_path / "opt"
    shutil.copytree(image / "opt", bare, ignore=shutil.ignore_patterns("psutil"))
    record = tmp_path / "record"
    proc = subprocess.run([python, "-I", "-S", str(bare / "entrypoint.py"), python, "-c",
                           "import os, sys; print('omp', os.environ['OMP_NUM_THREADS']); "
                           "sys.exit(3)"],
                          env=_env(image, LAUNCHER_RECORD_DIR=str(record)), cwd=image,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3 and proc.stdout.startswith("omp "), proc.stderr
    assert "this image lacks psutil" in proc.stderr, proc.stderr
    assert json.loads((record / "summary.json").read_text())["exit_status"] == 3


CAPPED = ("import os, resource, sys; print('omp', os.environ.get('OMP_NUM_THREADS')); "
          "print('nofile', resource.getrlimit(resource.RLIMIT_NOFILE)[0]); sys.exit(3)")


def test_an_older_python_runs_the_caps_and_refuses_the_watch_in_one_line(image, tmp_path):
    python = interpreter("3.7")
    build_steps(python, image)  # it compiles every module, so the image builds
    version = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, check=True).stdout.strip()
    for watch_stdin in ("", "1"):  # an image's start, and a native run's (fork and exec)
        proc = supervise(python, image, python, "-c", CAPPED, LAUNCHER_WATCH_STDIN=watch_stdin,
                         LAUNCHER_RECORD_DIR=str(tmp_path / "record"))
        lines = proc.stderr.splitlines()
        assert [ln for ln in lines if "watch" in ln] == [NOTE.format(v=version)], proc.stderr
        assert "Traceback" not in proc.stderr, proc.stderr
        got = dict(ln.split() for ln in proc.stdout.splitlines())
        assert got["omp"].isdigit() and got["nofile"] == "256", (proc.stdout, proc.stderr)
        assert proc.returncode == 3, proc.stderr  # the workload's own status
        assert lines[-1] == "launcher: the workload exited with its own status 3.", lines
    off = supervise(python, image, python, "-c", CAPPED, LAUNCHER_WATCH="0")
    assert off.returncode == 3 and "watch" not in off.stderr, off.stderr  # turned off: no word


def test_a_python_older_than_the_supervisors_runs_the_workload_said_in_one_line(image):
    """3.6 (`from __future__ import annotations` is 3.7's): the entrypoint says so in one
    line and execs the workload, uncapped; its status is the workload's."""
    python = interpreter("3.6")
    proc = supervise(python, image, "sh", "-c", "echo ran; exit 3")
    assert proc.returncode == 3 and proc.stdout == "ran\n", proc.stderr
    [line] = proc.stderr.splitlines()
    assert line.startswith("launcher: warning: this image's python3 is 3.6.") and line.endswith(
        "; launcher's supervisor needs 3.7 or newer: sh runs without its caps, unwatched"), line
    base = subprocess.run([python, "-I", "-S", str(image / "opt/entrypoint.py"),
                           "--record-base-env", str(image / "base36.json")])
    assert base.returncode == 0


def test_a_missing_workload_is_named_under_an_older_python(image):
    python = interpreter("3.7")
    proc = supervise(python, image, "/no/such/workload")
    assert proc.returncode == 127, proc.stderr


# -- the static guard: what a newer Python only has, in the modules an image runs -----------

NEWER_CALLS = {  # attribute or name -> the Python that has it
    "removeprefix": "3.9", "removesuffix": "3.9", "cache": "3.9", "lcm": "3.9",
    "pidfd_open": "3.9", "waitstatus_to_exitcode": "3.9", "is_relative_to": "3.9",
    "with_stem": "3.9", "randbytes": "3.9", "unparse": "3.9", "pairwise": "3.10",
    "bit_count": "3.10", "pidfd_send_signal": "3.9", "chdir": "3.11", "UTC": "3.11",
    "tcgetwinsize": "3.11", "F_SETPIPE_SZ": "3.10", "F_GETPIPE_SZ": "3.10",
    "linear_regression": "3.10", "correlation": "3.10", "covariance": "3.10",
    "get_annotations": "3.10", "NoneType": "3.10", "UnionType": "3.10", "KW_ONLY": "3.10",
    "StrEnum": "3.11", "ExceptionGroup": "3.11", "add_note": "3.11", "exception": "3.11",
    "hardlink_to": "3.10",
}
OWNERS = {"cache": "functools", "exception": "sys", "chdir": "contextlib", "UTC": "datetime",
          "lcm": "math", "unparse": "ast", "NoneType": "types", "UnionType": "types"}
NEWER_MODULES = {"tomllib": "3.11", "zoneinfo": "3.9", "graphlib": "3.9"}
NEWER_TYPING = {"Self", "ParamSpec", "TypeAlias", "Concatenate", "TypeGuard", "LiteralString",
                "Never", "assert_never", "reveal_type", "Required", "NotRequired", "Unpack",
                "TypeVarTuple", "override", "dataclass_transform", "Annotated"}
NEWER_KEYWORDS = {"strict": "zip, 3.10", "kw_only": "dataclass, 3.10", "slots": "dataclass, 3.10",
                  "process_group": "subprocess, 3.11"}
BUILTIN_GENERIC = {"list", "dict", "tuple", "set", "frozenset", "type"}


def image_files() -> list[Path]:
    from launcher.render.dockerfile import IMAGE_MODULES

    files: list[Path] = []
    for name in IMAGE_MODULES:
        src = ROOT / "launcher" / name
        files += sorted(src.rglob("*.py")) if src.is_dir() else [src]
    return files


def _typeish(node: ast.AST, abc: set[str]) -> bool:
    if isinstance(node, ast.Constant):
        return node.value is None
    if isinstance(node, ast.Name):
        return (node.id in BUILTIN_GENERIC | {"int", "str", "float", "bool", "bytes", "object"}
                or node.id in abc or (node.id[:1].isupper() and node.id.upper() != node.id))
    if isinstance(node, ast.Attribute):
        return node.attr[:1].isupper() and node.attr.upper() != node.attr
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _typeish(node.left, abc) or _typeish(node.right, abc)
    return isinstance(node, ast.Subscript)


def _dictish(node: ast.AST) -> bool:
    if isinstance(node, ast.IfExp):
        return _dictish(node.body) or _dictish(node.orelse)
    return isinstance(node, ast.Dict | ast.DictComp)


def runtime_findings(path: Path) -> list[str]:
    """Constructs of a newer Python that 3.8 evaluates (annotations under `from __future__
    import annotations` are strings: never evaluated)."""
    src = path.read_text()
    tree = ast.parse(src)
    lazy = "from __future__ import annotations" in src
    annotations: set[int] = set()
    for node in ast.walk(tree):
        anns = [getattr(node, "annotation", None), getattr(node, "returns", None)]
        for a in anns if lazy else ():
            annotations |= {id(sub) for sub in ast.walk(a)} if a is not None else set()
    abc = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
           and node.module in ("collections.abc", "collections", "re", "contextlib")
           for a in node.names}
    out = []
    where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:"
    for node in ast.walk(tree):
        line = f"{where}{getattr(node, 'lineno', '?')}"
        if id(node) in annotations:
            continue
        if isinstance(node, ast.Match):
            out.append(f"{line}: match (3.10)")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr) and (
                _typeish(node.left, abc) and _typeish(node.right, abc)):
            out.append(f"{line}: X | Y evaluated (3.10): {ast.unparse(node)}")
        elif isinstance(node, ast.BinOp | ast.AugAssign) and isinstance(node.op, ast.BitOr) and (
                any(_dictish(n) for n in ([node.value] if isinstance(node, ast.AugAssign) else
                                          [node.left, node.right]))):
            out.append(f"{line}: dict | dict (3.9): {ast.unparse(node)}")
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and (
                node.value.id in BUILTIN_GENERIC | abc):
            out.append(f"{line}: {node.value.id}[...] evaluated (3.9): {ast.unparse(node)}")
        elif isinstance(node, ast.Attribute) and node.attr in NEWER_CALLS:
            owner = OWNERS.get(node.attr)
            if owner and ast.unparse(node.value) != owner:  # os.chdir is old; contextlib's new
                continue
            out.append(f"{line}: .{node.attr} ({NEWER_CALLS[node.attr]})")
        elif isinstance(node, ast.ImportFrom) and node.module in ("typing", "itertools",
                                                                   "functools", "contextlib",
                                                                   "datetime", "math"):
            for a in node.names:
                if (node.module == "typing" and a.name in NEWER_TYPING) or (
                        node.module != "typing" and a.name in NEWER_CALLS):
                    out.append(f"{line}: from {node.module} import {a.name}")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [
                node.module or ""]
            out += [f"{line}: import {n} ({NEWER_MODULES[n]})" for n in names
                    if n.split(".")[0] in NEWER_MODULES]
        elif isinstance(node, ast.Call) and any(
                k.arg in NEWER_KEYWORDS for k in node.keywords):
            fn = ast.unparse(node.func)
            for k in node.keywords:
                kind = NEWER_KEYWORDS.get(k.arg or "")
                if kind and kind.split(",")[0] in fn:
                    out.append(f"{line}: {fn}({k.arg}=) ({kind})")
    return out


def test_the_image_modules_use_nothing_of_a_newer_python():
    found = [f for path in image_files() for f in runtime_findings(path)]
    assert found == [], "\n".join(found)


def test_the_guard_finds_what_it_looks_for(tmp_path):
    bad = tmp_path / "probe.py"
    bad.write_text("from __future__ import annotations\nimport functools\nimport tomllib\n"
                   "from dataclasses import dataclass\nfrom typing import Self\n"
                   "Row = dict[str, int]\n\n\n@dataclass(kw_only=True)\nclass A:\n"
                   "    x: int | None = None\n\n\n@functools.cache\n"
                   "def f(a: list[int], b: str) -> str | None:\n"
                   "    isinstance(a, int | None)\n    c = {} | {'a': 1}\n"
                   "    list(zip(a, b, strict=True))\n    return b.removeprefix('x')\n")
    found = runtime_findings(bad)
    kinds = " ".join(found)
    for what in ("import tomllib", "import Self", "dict[...]", "kw_only", ".cache",
                 "X | Y", "dict | dict", "zip(strict=)", ".removeprefix"):
        assert what in kinds, (what, found)
    assert not any(":11:" in f or ":15:" in f for f in found), found  # annotations: strings


def test_ruff_holds_every_image_module_to_3_8():
    import tomllib

    from launcher.render.dockerfile import IMAGE_MODULES

    pinned = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"][
        "per-file-target-version"]
    want = {(f"launcher/{n}/**/*.py" if (ROOT / "launcher" / n).is_dir() else f"launcher/{n}")
            for n in IMAGE_MODULES}
    assert {g for g, v in pinned.items() if v == "py38"} == want
    assert sys.version_info >= (3, 11)  # launcher's own Python: tomllib here is fine


# -- a real image: `launcher build` on a base whose python3 is pyenv's old one ----------------

OLD_BASE = """FROM {base}
COPY {name} {prefix}
RUN ln -s {prefix}/bin/python3 /usr/local/bin/python3 && python3 --version
"""


@pytest.mark.docker
@pytest.mark.parametrize("version", ["3.7", "3.8"])
def test_a_built_image_whose_python3_is_older(version, tmp_path):
    """The base: the local Debian base (its python3 3.11) with pyenv's interpreter first on
    PATH (the same prefix: the interpreter finds its libpython there; the same Debian as this
    host). `launcher build` runs its steps under it; a bare `docker run` of the image runs
    the supervisor under it."""
    from tests.docker_helpers import BASE, docker_missing, launcher

    need("Docker and the base image", docker_missing())
    python = interpreter(version)
    prefix = Path(python).resolve().parents[1]
    if prefix.parent.name != "versions":  # a system's python3.X: its libraries are the host's
        pytest.skip(f"{python} is no pyenv interpreter, whose prefix an image can take whole")
    base, image = f"launcher-test/py{version}:none", f"launcher-test/old{version}:none"
    (tmp_path / "Dockerfile").write_text(OLD_BASE.format(base=BASE, name=prefix.name,
                                                         prefix=prefix))
    pack = subprocess.run(
        f"tar -c -C {prefix.parent} --exclude='*/test' --exclude=__pycache__ --exclude='*.a' "
        f"--exclude=site-packages {prefix.name} -C {tmp_path} Dockerfile | "
        f"docker build -q -t {base} -", shell=True, capture_output=True, text=True, timeout=600)
    assert pack.returncode == 0, pack.stderr[-3000:]
    (tmp_path / "old.yaml").write_text(PROFILE)
    built = launcher("build", "-p", str(tmp_path / "old.yaml"), "--base-image", base,
                     "--image", image, timeout=900)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    shutil.copy(LEAK, tmp_path / "leak.py")
    (tmp_path / "rec").mkdir()
    proc = subprocess.run(["docker", "run", "--rm", "-v", f"{tmp_path}:/w", "-w", "/w",
                           "-e", "LAUNCHER_RECORD_DIR=/w/rec/r", image, "python3", "leak.py",
                           "--files", "4", "--cycles", "300", "--seconds", "0.1"],
                          capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "Too many open files" in proc.stderr, out[-3000:]
    assert "/opt/launcher" not in proc.stderr, out[-3000:]  # no traceback of the supervisor's
    said = [ln for ln in out.splitlines() if ln.startswith("launcher: growth: ")]
    if version == "3.7":
        assert NOTE.format(v=prefix.name) in out.splitlines(), out[-3000:]
        assert not said and not (tmp_path / "rec/r").exists()
    else:
        assert said and "open files +4 per cycle" in said[0], out[-3000:]
        assert json.loads((tmp_path / "rec/r/summary.json").read_text())["exit_status"] == 1
