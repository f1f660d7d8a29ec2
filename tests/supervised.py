"""The supervisor driven as a user's process meets it, for the supervisor's unit tests
(tests/test_supervise_*.py): `python -m launcher.supervise` around a small Python workload,
its exit file and its lines; and the plain waits on a pipe or a child they share."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from launcher import contract as c
from tests.conftest import ROOT

PY = sys.executable


def supervise(tmp_path: Path, code: str, *, pass_fds: tuple[int, ...] = (), wait: bool = True,
              **more: str) -> subprocess.Popen[str] | subprocess.CompletedProcess[str]:
    """The supervisor around `python -c code`, launcher's caps taken as given (a native run),
    its exit file in tmp_path; the watch off unless `more` says otherwise."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), c.RESOLVED: "1",
           c.EXIT_FILE: str(tmp_path / "exit.json"), c.WATCH: "0", **more}
    argv = [PY, "-m", "launcher.supervise", "--", PY, "-c", code]
    if not wait:
        return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, pass_fds=pass_fds)
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60,
                          pass_fds=pass_fds)


def exit_record(tmp_path: Path) -> dict[str, Any]:
    """The exit file `supervise` had written in tmp_path."""
    return json.loads((tmp_path / "exit.json").read_text())


def said(stderr: str) -> list[str]:
    """The supervisor's own lines in `stderr`, without their `launcher: `."""
    return [line[len("launcher: "):] for line in stderr.splitlines()
            if line.startswith("launcher: ")]


def read_all(fd: int) -> bytes:
    """Everything until the pipe's end; the fd closed."""
    out = b""
    while data := os.read(fd, 65536):
        out += data
    os.close(fd)
    return out


def wait_status(pid: int) -> int:
    """A child's wait status, once it has ended."""
    _, status = os.waitpid(pid, 0)
    return status
