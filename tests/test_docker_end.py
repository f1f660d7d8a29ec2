"""The end of a Docker run: launcher returns at its supervisor's end, with the status from the
supervisor's exit file, and leaves the exited container to the daemon's AutoRemove; without
that file (the supervisor killed), or after a stop (Ctrl-C), the status is the daemon's and the
removal is waited for. A name still held by the ended container of the run before is waited
for, then created again. An exited container the daemon removes itself is no leftover; one it
keeps is, and so is a running one whose supervisor has not ended."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from launcher import contract
from launcher.runtime import docker_api
from launcher.runtime.docker_engine import DockerEngine
from launcher.runtime.engine import Started
from launcher.runtime.engines import tidy_leftovers
from launcher.runtime.spec import RunSpec
from tests.conftest import ROOT
from tests.docker_helpers import (
    BASE,
    FROM_OUTSIDE,
    SUPERVISOR_KILLED,
    run_dir_of,
    supervisor_sentence,
)
from tests.polling import wait_until


class _Sock:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def settimeout(self, _: float) -> None:
        pass


class _Wait:
    """A wait request registered with the (fake) daemon; `read` is the daemon's answer."""

    def __init__(self, answer: bytes, log: list[str], what: str) -> None:
        self.sock, self.answer, self.log, self.what = _Sock(), answer, log, what

    def read(self) -> bytes:
        self.log.append(self.what)
        return self.answer


class _FakeAPI:
    """The daemon as the engine sees it: the container's output, then its supervisor's end
    (the exit file written, or not), then the daemon's own exit and removal."""

    exit_file: Path | None = None
    writes: dict[str, Any] | None = None
    log: list[str] = []

    def __init__(self) -> None:
        pass

    def request(self, method: str, path: str, body: Any = None, query: Any = None,
                timeout: float | None = None) -> Any:
        self.log.append(f"{method} {path.rsplit('/', 1)[-1]}")
        return {"Id": "c0ffee"} if path.endswith("/create") else {}

    def attach(self, cid: str, stdin: bool = False,
               tty: bool = False) -> Iterator[tuple[int, bytes]]:
        yield 1, b"hello\n"
        if self.writes is not None and self.exit_file is not None:
            contract.write_exit(str(self.exit_file), self.writes)  # the supervisor's last act

    def wait_stream(self, cid: str, condition: str = "next-exit") -> _Wait:
        return _Wait(b'{"StatusCode": 137}', self.log, f"wait {condition}")


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writes: dict[str, Any] | None,
         name: str | None = None, api: type[_FakeAPI] = _FakeAPI,
         on_start: Callable[[Started], str] | None = None) -> tuple[int, list[str]]:
    """A run over `api`; the output, and what `on_start` says, in the order they came."""
    exit_file = tmp_path / "exit.json"
    monkeypatch.setattr(_FakeAPI, "exit_file", exit_file)
    monkeypatch.setattr(_FakeAPI, "writes", writes)
    monkeypatch.setattr(_FakeAPI, "log", [])
    monkeypatch.setattr(docker_api, "DockerAPI", api)
    spec = RunSpec(command=["true"], image="img", env={contract.EXIT_FILE: str(exit_file)},
                   name=name)
    said: list[str] = []
    hook = None if on_start is None else (lambda started: said.append(on_start(started)))
    result = DockerEngine().run(spec, lambda _stream, data: said.append(data.decode()), hook)
    assert said[-1:] == ["hello\n"]
    return result.status, _FakeAPI.log if on_start is None else said


def test_the_status_is_the_supervisors_without_waiting_for_the_daemon(tmp_path, monkeypatch):
    status, log = _run(tmp_path, monkeypatch, {"status": 7, "diagnosis": "seven."})
    assert status == 7
    assert log == ["POST create", "POST start"]  # neither the exit nor the removal awaited


def test_without_the_exit_file_the_status_and_removal_are_the_daemons(tmp_path, monkeypatch):
    status, log = _run(tmp_path, monkeypatch, None)
    assert status == 137
    wait_until(lambda: "wait removed" in log, timeout=5, what="the removal to be awaited")
    assert log[:3] == ["POST create", "POST start", "wait next-exit"]


class _Stopped(_FakeAPI):
    """Ctrl-C while the container runs: forwarded, then the supervisor's end as usual."""

    def attach(self, cid: str, stdin: bool = False,
               tty: bool = False) -> Iterator[tuple[int, bytes]]:
        os.kill(os.getpid(), signal.SIGINT)  # launcher's handler forwards it to the container
        yield from super().attach(cid, stdin)


def test_after_a_stop_the_exit_and_removal_are_awaited(tmp_path, monkeypatch):
    status, log = _run(tmp_path, monkeypatch, {"status": 130, "diagnosis": "int."},
                       api=_Stopped)
    assert status == 137  # the daemon's word: nothing is left when launcher returns
    assert log[:4] == ["POST create", "POST start", "POST kill", "wait next-exit"]
    wait_until(lambda: "wait removed" in log, timeout=5, what="the removal to be awaited")


class _StoppedByCaller(_FakeAPI):
    """A stop through the start hook's `stop` (a job's Ctrl-C or timeout, the growth watch):
    the container ends once the kill is sent."""

    def attach(self, cid: str, stdin: bool = False,
               tty: bool = False) -> Iterator[tuple[int, bytes]]:
        wait_until(lambda: "POST kill" in self.log, timeout=10, what="the stop")
        yield from super().attach(cid, stdin)


def test_a_stop_by_the_caller_awaits_the_exit_and_removal_too(tmp_path, monkeypatch):
    def stop(started: Started) -> str:
        started.stop(15)
        return "stopped"

    status, _ = _run(tmp_path, monkeypatch, {"status": 143, "diagnosis": "term."},
                     api=_StoppedByCaller, on_start=stop)
    assert status == 137  # the daemon's word
    assert "wait next-exit" in _FakeAPI.log
    wait_until(lambda: "wait removed" in _FakeAPI.log, timeout=5, what="the removal")


class _SlowInspect(_FakeAPI):
    """A busy daemon: the inspect that gives the PID answers after the first output."""

    def request(self, method: str, path: str, body: Any = None, query: Any = None,
                timeout: float | None = None) -> Any:
        if method == "GET":
            time.sleep(0.3)
            return {"State": {"Pid": 4242}}
        return super().request(method, path, body, query, timeout)


def test_the_start_line_comes_before_the_workloads_first_output(tmp_path, monkeypatch):
    _, said = _run(tmp_path, monkeypatch, {"status": 0, "diagnosis": "ok."}, api=_SlowInspect,
                   on_start=lambda started: f"started {started.pid}")
    assert said == ["started 4242", "hello\n"]


class _NameHeld(_FakeAPI):
    """The name is held by the run before's container, ended, which the daemon removes."""

    def request(self, method: str, path: str, body: Any = None, query: Any = None,
                timeout: float | None = None) -> Any:
        if path.endswith("/create") and "POST create" not in self.log:
            self.log.append("POST create")
            raise docker_api.ApiError(409, 'Conflict. The container name "/x" is already in use')
        if path == "/containers/x/json":
            self.log.append("GET x")
            return {"Id": "before", "State": {"Status": "exited"},
                    "HostConfig": {"AutoRemove": True}}
        return super().request(method, path, body, query, timeout)

    def wait_stream(self, cid: str, condition: str = "next-exit") -> _Wait:
        return _Wait(b'{"StatusCode": 0}', self.log, f"wait {condition} {cid}")


def test_a_name_held_by_the_ended_run_before_is_waited_for(tmp_path, monkeypatch):
    status, log = _run(tmp_path, monkeypatch, {"status": 0, "diagnosis": "ok."}, name="x",
                       api=_NameHeld)
    assert status == 0
    assert log == ["POST create", "GET x", "wait removed before", "POST create", "POST start"]


def test_an_exited_container_the_daemon_removes_is_no_leftover(monkeypatch):
    dead = f"{socket.gethostname()}:{_dead_pid()}"
    listed = [{"Id": f"{n}" * 12, "Names": [f"/{n}"], "State": "exited",
               "Labels": {"launcher.owner": dead, "launcher.run": n}} for n in "ab"]

    class Listing(_FakeAPI):
        def request(self, method: str, path: str, body: Any = None, query: Any = None,
                    timeout: float | None = None) -> Any:
            if path == "/containers/json":
                return listed
            return {"State": {"Status": "exited"},  # as the daemon's inspect says it
                    "HostConfig": {"AutoRemove": path.startswith("/containers/a")}}

    monkeypatch.setattr(docker_api, "DockerAPI", Listing)
    assert [x.ident for x in DockerEngine().leftovers()] == ["b" * 12]


def test_a_container_whose_supervisor_ended_is_no_leftover(tmp_path, monkeypatch):
    """Still running for a busy daemon after launcher returned at its supervisor's end (the
    exit file written): the daemon's to finish. A killed launcher's supervisor writes none."""
    dead = f"{socket.gethostname()}:{_dead_pid()}"
    contract.write_exit(str(tmp_path / "ended.json"), {"status": 0, "diagnosis": "ok."})
    listed = [{"Id": f"{n}" * 12, "Names": [f"/{n}"], "State": "running",
               "Labels": {"launcher.owner": dead, "launcher.run": n}} for n in "ek"]

    class Listing(_FakeAPI):
        def request(self, method: str, path: str, body: Any = None, query: Any = None,
                    timeout: float | None = None) -> Any:
            if path == "/containers/json":
                return listed
            name = "ended" if path.startswith("/containers/e") else "killed"
            return {"State": {"Status": "running"}, "HostConfig": {"AutoRemove": True},
                    "Config": {"Env": [f"{contract.EXIT_FILE}={tmp_path}/{name}.json"]}}

    monkeypatch.setattr(docker_api, "DockerAPI", Listing)
    assert [x.ident for x in DockerEngine().leftovers()] == ["k" * 12]


def _dead_pid() -> int:
    """A PID no process has: above the kernel's pid_max (one that ended may be given to
    another process before the test reads it, where PIDs wrap on a busy host)."""
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


@pytest.mark.docker
def test_an_exited_container_the_daemon_keeps_is_a_leftover(client):
    owner = f"{socket.gethostname()}:{_dead_pid()}"
    c = client.containers.run(BASE, ["true"], detach=True, auto_remove=False,
                              labels={"launcher.owner": owner, "launcher.run": "kept-run"})
    try:
        c.wait(timeout=60)
        found = [x for x in DockerEngine().leftovers() if x.ident == c.id[:12]]
        assert [x.detail for x in found] == [f"{c.name}, run kept-run, exited"]
    finally:
        subprocess.run(["docker", "rm", "-f", c.id], capture_output=True)


@pytest.mark.docker
def test_a_killed_supervisor_ends_with_the_daemons_status_and_nothing_left(client, tmp_path):
    name = f"lt-end-{uuid.uuid4().hex[:8]}"
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        [sys.executable, "-m", "launcher", "run", "--runtime", "docker", "--image", BASE,
         "--name", name, "--", "sh", "-c", f"touch {ready}; sleep 300"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(ready.exists, timeout=120, what="the workload to start")
        subprocess.run(["docker", "kill", name], check=True, capture_output=True)  # PID 1
        _, err = proc.communicate(timeout=60)
        held = subprocess.run(["docker", "ps", "--all", "--quiet", "--filter", f"name={name}"],
                              capture_output=True, text=True).stdout
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
    assert proc.returncode == 137, err
    assert held == "", err  # at once: that end's removal was awaited
    # said by launcher, as the supervisor says nothing more (no memory limit was asked)
    assert supervisor_sentence(err) == SUPERVISOR_KILLED + FROM_OUTSIDE, err
    summary = json.loads((run_dir_of(err) / "summary.json").read_text())
    assert summary["exit_status"] == 137, summary
    assert summary["diagnosis"].startswith("the run's supervisor was killed"), summary


@pytest.mark.docker
def test_a_never_started_container_of_a_gone_launcher_is_removed_unforced(client):
    owner = f"{socket.gethostname()}:{_dead_pid()}"
    c = client.containers.create(BASE, ["true"], labels={"launcher.owner": owner,
                                                          "launcher.run": "never-run"})
    try:
        removed, left = tidy_leftovers(DockerEngine())
        assert removed >= 1 and not client.containers.list(all=True, filters={"id": c.id})
    finally:
        subprocess.run(["docker", "rm", "-f", c.id], capture_output=True)


class _StartedSince(_FakeAPI):
    """Listed as created, started before the sweep's removal: the daemon refuses an
    unforced removal of a running container."""

    def request(self, method: str, path: str, body: Any = None, query: Any = None,
                timeout: float | None = None) -> Any:
        if path == "/containers/json":
            return [{"Id": "s" * 64, "Names": ["/s"], "State": "created",
                     "Labels": {"launcher.owner": self.owner, "launcher.run": "s"}}]
        self.log.append(f"{method} {query}")
        raise docker_api.ApiError(409, "cannot remove a running container")


def test_a_container_started_since_it_was_seen_idle_is_not_killed(monkeypatch):
    monkeypatch.setattr(_FakeAPI, "log", [])
    monkeypatch.setattr(_StartedSince, "owner", f"{socket.gethostname()}:{_dead_pid()}",
                        raising=False)
    monkeypatch.setattr(docker_api, "DockerAPI", _StartedSince)
    removed, left = tidy_leftovers(DockerEngine())
    assert (removed, left) == (0, ["container ssssssssssss (s, run s, created)"])
    assert _FakeAPI.log == ["DELETE {}"]  # never with force
