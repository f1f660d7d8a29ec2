"""What launcher says about Docker (issue 15): a socket this user may not open is no stopped
daemon; a pull's progress in one line per second; image references split as the daemon wants
them. Unit tests of the mapping; the real daemon is in test_everyday.py."""

from __future__ import annotations

import socket

import pytest

from launcher.errors import EngineError
from launcher.runtime import docker_api
from launcher.runtime.docker_api import DockerAPI, Response, split_reference, unreachable
from launcher.runtime.docker_engine import PullProgress


def test_permission_denied_on_the_socket_says_so_and_how_to_fix_it(monkeypatch):
    def refuse(self, address):  # type: ignore[no-untyped-def]
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    with pytest.raises(EngineError) as err:
        DockerAPI("unix:///var/run/docker.sock").ping()
    text = str(err.value)
    assert text.startswith("permission denied on the Docker socket /var/run/docker.sock: ")
    assert "docker group" in text and "--runtime native" in text
    assert "start dockerd" not in text and "\n" not in text


def test_a_daemon_that_is_not_there_is_still_told_to_start():
    text = unreachable("unix:///nope.sock", FileNotFoundError(2, "No such file or directory"))
    assert text.startswith("no Docker daemon answers at unix:///nope.sock") and \
        "start dockerd" in text


@pytest.mark.parametrize(("image", "parts"), [
    ("python:3.11-slim", ("python", "3.11-slim")),
    ("python", ("python", "latest")),  # never an empty tag: that pulls every tag
    ("127.0.0.1:5000/a/b", ("127.0.0.1:5000/a/b", "latest")),
    ("127.0.0.1:5000/a/b:t1", ("127.0.0.1:5000/a/b", "t1")),
    ("a/b@sha256:abc", ("a/b", "sha256:abc")),
])
def test_references_split_for_the_pull(image, parts):
    assert split_reference(image) == parts


def test_pull_progress_sums_the_layers():
    p = PullProgress("img:1", every=0)
    assert p.update({"status": "Pulling from library/img", "id": "1"}) == "pulling img:1"
    p.update({"status": "Pulling fs layer", "id": "a"})
    p.update({"status": "Already exists", "id": "b"})
    line = p.update({"status": "Downloading", "id": "a", "progressDetail": {
        "current": 1 << 20, "total": 4 << 20}})
    assert line == "pulling img:1: 1/2 layers, 1MiB of 4MiB"
    p.update({"status": "Pull complete", "id": "a"})
    assert p.done() == "pulled img:1 (2 layers, 4MiB fetched)"
    assert PullProgress("x", every=60).update({"status": "Waiting", "id": "c"}) is not None
    slow = PullProgress("x", every=60)
    slow.update({"status": "Waiting", "id": "c"})
    assert slow.update({"status": "Waiting", "id": "d"}) is None  # one line a second at most


def test_a_streamed_body_comes_line_by_line():
    a, b = socket.socketpair()
    body = b'{"status":"one"}\n{"status":"t'
    rest = b'wo"}\n'
    a.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
              + f"{len(body):x}\r\n".encode() + body + b"\r\n"
              + f"{len(rest):x}\r\n".encode() + rest + b"\r\n0\r\n\r\n")
    a.close()
    assert list(Response(b).lines()) == [b'{"status":"one"}', b'{"status":"two"}']
    assert docker_api.API.startswith("/v1.")
