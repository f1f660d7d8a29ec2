"""A command that does not start says why as a shell does, with the shell's status (issue 44):
each case runs under bash itself and under the supervisor (and `launcher run --runtime
native`, which checks the command before anything starts), and the words and statuses are
compared. And launcher's figures are in units: a container's memory limit of 256MiB is said
`256MiB`, not `2.68435e+08`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.docker_helpers import in_process

ENTRY = ROOT / "launcher/supervise/entrypoint.py"


def bash(cwd: Path, word: str, path: str | None = None) -> tuple[int, str]:
    """bash's status and its words after the command's name (`Permission denied`)."""
    env = {**os.environ, "PATH": path or os.environ["PATH"]}
    proc = subprocess.run(["bash", "-c", word], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=30)
    said = proc.stderr.strip().splitlines()[-1]
    return proc.returncode, said.split(f"{word}: ", 1)[-1]  # bash: line 1: ./x: WORDS


def supervised(cwd: Path, word: str, path: str | None = None) -> tuple[int, str]:
    """The supervisor's status and its one line, as an image or a native run starts it."""
    env = {**os.environ, "LAUNCHER_RESOLVED": "1", "LAUNCHER_WATCH": "0",
           "PATH": path or os.environ["PATH"]}
    proc = subprocess.run([sys.executable, "-I", "-S", str(ENTRY), word], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stderr.strip()


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "notexec").write_text("echo ran\n")
    (tmp_path / "notexec").chmod(0o644)
    (tmp_path / "adir").mkdir()
    for name, head in (("badinterp", "#!/usr/bin/nosuch -x\n"), ("crlf", "#!/bin/sh\r\n")):
        (tmp_path / name).write_text(f"{head}echo ran\n")
        (tmp_path / name).chmod(0o755)
    return tmp_path


@pytest.mark.parametrize("word, words", [
    ("./notexec", "Permission denied"),
    ("./adir", "Is a directory"),
    ("./nosuch", "No such file or directory"),
])
def test_a_file_that_cannot_run_is_said_as_bash_says_it(files, word, words):
    rc, said = bash(files, word)
    assert said == words, said  # what bash says here
    assert supervised(files, word) == (rc, f"launcher: cannot run {word!r}: {words}")


@pytest.mark.parametrize("word, named", [
    ("./badinterp", "/usr/bin/nosuch: bad interpreter: No such file or directory"),
    ("./crlf", "'/bin/sh\\r': bad interpreter: No such file or directory; its #! line ends in a "
               "carriage return (Windows line ends)"),
])
def test_a_missing_interpreter_is_named(files, word, named):
    """bash 5.2 says `cannot execute: required file not found` (127); older ones named the
    interpreter (`/usr/bin/nosuch: bad interpreter: No such file or directory`, 126): the
    supervisor names it, with bash 5.2's status."""
    rc, said = bash(files, word)
    assert said in ("cannot execute: required file not found", named.split(";")[0]), said
    assert (rc == 127) == ("required file not found" in said), (rc, said)
    assert supervised(files, word) == (127, f"launcher: cannot run {word!r}: {named}")


def test_a_script_found_on_path_names_its_interpreter_too(files):
    path = f"{files}:{os.environ['PATH']}"
    rc, said = bash(files, "badinterp", path)
    assert rc in (126, 127) and said.endswith(("required file not found", "No such file or "
                                                                          "directory")), said
    assert supervised(files, "badinterp", path) == (
        127, "launcher: cannot run 'badinterp': /usr/bin/nosuch: bad interpreter: No such file "
             "or directory")


@pytest.mark.parametrize("name, words", [("notexec", "Permission denied"),
                                         ("adir", "Is a directory")])
def test_launcher_run_says_it_before_anything_with_126(files, name, words):
    rc, said = bash(files, f"./{name}")
    got = in_process("run", "--runtime", "native", "--", f"./{name}", cwd=files)
    assert got.returncode == rc == 126, (got.returncode, got.stderr)
    assert got.stderr.strip() == f"error: cannot run './{name}': {words}", got.stderr


def test_a_container_limit_is_said_in_units():
    from launcher.probe.cgroup_facts import CgroupFacts
    from launcher.supervise.enforce import held

    cg = CgroupFacts(memory_limit=256 << 20, pids_max=50, cpu_quota=1.5,
                     binding={"memory": "/sys/fs/cgroup/box"})
    assert held(cg, "memory", float(512 << 20)) == "256MiB (at /sys/fs/cgroup/box)"
    assert held(cg, "pids", 64.0) == "50" and held(cg, "cpus", 2.0) == "1.5"
