"""The supervisor driven as a user's process meets it, for the supervisor's unit tests
(tests/test_supervise_*.py): `python -m launcher.supervise` around a small Python workload,
its exit file and its lines; a unit run in a forked child of its own (`in_child`); and the
plain waits on a pipe or a child they share."""

from __future__ import annotations

import fcntl
import json
import os
import pickle
import signal
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from launcher import contract as c
from tests.conftest import ROOT

PY = sys.executable
T = TypeVar("T")


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


def in_child(fn: Callable[[], T], timeout: int = 20) -> T:
    """`fn()` in a forked child (whose fds it may rearrange at will), its result pickled back;
    its exception fails the test with the child's traceback, a hang past `timeout` seconds
    (SIGALRM) fails it too."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(r)
            signal.signal(signal.SIGALRM, lambda *_: os._exit(70))  # PID 1 ignores the default
            signal.alarm(timeout)
            try:
                out: tuple[str, object] = ("ok", fn())
            except BaseException:  # noqa: BLE001 - reported to the parent
                out = ("error", traceback.format_exc())
            data = pickle.dumps(out)
            while data:
                data = data[os.write(w, data):]
        finally:
            os._exit(0)
    os.close(w)
    data = read_all(r)
    _, status = os.waitpid(pid, 0)
    if not data:
        pytest.fail(f"the child ended without a result (wait status {status:#x}: 70 is a "
                    f"hang)")
    kind, value = pickle.loads(data)
    if kind == "error":
        pytest.fail(f"in the child:\n{value}", pytrace=False)
    return value  # type: ignore[no-any-return]


def open_fds() -> set[int]:
    """The descriptors open in this process (0-1023)."""
    out = set()
    for fd in range(1024):
        try:
            fcntl.fcntl(fd, fcntl.F_GETFD)
        except OSError:
            continue
        out.add(fd)
    return out
