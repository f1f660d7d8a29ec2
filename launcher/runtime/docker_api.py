"""A small Docker Engine API client on the standard library, for the run path.

`launcher run` must start no slower than `docker compose run`; importing the docker SDK alone
costs ~160 ms (requests). Builds keep using the SDK. Speaks HTTP over the unix socket (or a
plain tcp:// DOCKER_HOST) and reads the multiplexed attach stream.
"""

from __future__ import annotations

import json
import os
import socket
import struct
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode  # pathlib imports it anyway

from launcher.errors import EngineError

API = "/v1.41"


class ApiError(EngineError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


READ = 1 << 20  # bytes one read of an attach stream takes at most


class Response:
    """A minimal HTTP/1.1 response: status, headers, and a body read by length or chunks.
    (http.client would pull in the email package: ~15 ms of every `launcher run`.)"""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""
        head = self._until(b"\r\n\r\n").decode("latin-1").split("\r\n")
        self.status = int(head[0].split()[1])
        self.headers = {k.strip().lower(): v.strip()
                        for k, _, v in (line.partition(":") for line in head[1:] if line)}

    def _fill(self) -> bool:
        chunk = self.sock.recv(65536)
        self.buf += chunk
        return bool(chunk)

    def _until(self, sep: bytes) -> bytes:
        while sep not in self.buf:
            if not self._fill():
                raise EngineError("the Docker daemon closed the connection")
        out, _, self.buf = self.buf.partition(sep)
        return out

    def _exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            if not self._fill():
                break
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(self._until(b"\r\n").split(b";")[0], 16)
                if size == 0:
                    return body
                body += self._exactly(size)
                self._until(b"\r\n")
        if "content-length" in self.headers:
            return self._exactly(int(self.headers["content-length"]))
        while self._fill():
            pass
        out, self.buf = self.buf, b""
        return out

    def lines(self) -> Iterator[bytes]:
        """The body line by line as it arrives (a streamed JSON progress body)."""
        chunked = self.headers.get("transfer-encoding", "").lower() == "chunked"
        partial = b""
        while data := (self._next_chunk() if chunked else self._next_raw()):
            *done, partial = (partial + data).split(b"\n")
            yield from done
        if partial.strip():
            yield partial

    def _next_chunk(self) -> bytes:
        size = int(self._until(b"\r\n").split(b";")[0], 16)
        if size == 0:
            return b""
        data = self._exactly(size)
        self._until(b"\r\n")
        return data

    def _next_raw(self) -> bytes:
        if not self.buf and not self._fill():
            return b""
        data, self.buf = self.buf, b""
        return data

    def raw(self) -> Iterator[tuple[int, bytes]]:
        """A container with a terminal: one stream, as it comes (stdout)."""
        try:
            if self.buf:
                yield 1, self.buf
                self.buf = b""
            while chunk := self.sock.recv(READ):
                yield 1, chunk
        finally:
            self.sock.close()

    def frames(self) -> Iterator[tuple[int, bytes]]:
        """The multiplexed attach stream: (1 stdout | 2 stderr, data) until the end. What one
        read brings (up to a MiB) is given out whole, a stream's frames in a row joined: a
        fast writer's output is a few writes a MiB, not one per 32 KiB frame."""
        buf = bytearray(self.buf)
        self.buf = b""
        try:
            while True:
                pos, joined = 0, _Joined()
                while len(buf) - pos >= 8:
                    stream, size = struct.unpack_from(">BxxxL", buf, pos)
                    if len(buf) - pos - 8 < size:
                        break  # the rest of it in the next read
                    if joined.stream not in (None, stream):
                        yield joined.take()
                    joined.add(stream, buf[pos + 8:pos + 8 + size])
                    pos += 8 + size
                if joined.parts:
                    yield joined.take()
                del buf[:pos]
                chunk = self.sock.recv(READ)
                if not chunk:
                    return
                buf += chunk
        finally:
            self.sock.close()


class _Joined:
    """Frames of one stream in a row, as one piece."""

    def __init__(self) -> None:
        self.stream: int | None = None
        self.parts: list[bytearray] = []

    def add(self, stream: int, part: bytearray) -> None:
        self.stream = stream
        self.parts.append(part)

    def take(self) -> tuple[int, bytes]:
        assert self.stream is not None
        out = (self.stream, b"".join(self.parts))
        self.stream, self.parts = None, []
        return out


def unreachable(host: str, exc: Exception) -> str:
    """Why the daemon at `host` cannot be reached, and what to do: a socket this user may not
    open is no stopped daemon."""
    if isinstance(exc, PermissionError) or "Permission denied" in str(exc):
        where = host[len("unix://"):] if host.startswith("unix://") else host
        return (f"permission denied on the Docker socket {where}: this user may not use the "
                f"Docker daemon; join the docker group (`sudo usermod -aG docker $USER`, then "
                f"log in again) or run without a container: --runtime native")
    return f"no Docker daemon answers at {host} ({exc}); start dockerd (or set DOCKER_HOST)"


def split_reference(image: str) -> tuple[str, str]:
    """`REPO[:TAG|@DIGEST]` -> (REPO, TAG or DIGEST); no tag is `latest` (an empty tag would
    pull every tag of the repository)."""
    if "@" in image:
        repo, _, digest = image.partition("@")
        return repo, digest
    last = image.rsplit("/", 1)[-1]
    if ":" in last:
        repo, _, tag = image.rpartition(":")
        return repo, tag
    return image, "latest"


def _message(raw: bytes) -> str:
    try:
        return str(json.loads(raw).get("message", raw.decode())).strip()
    except (ValueError, AttributeError):
        return raw.decode(errors="replace").strip()


class DockerAPI:
    def __init__(self, host: str | None = None) -> None:
        host = host or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        if host.startswith("unix://"):
            self.address: Any = host[len("unix://"):]
            self.family = socket.AF_UNIX
        elif host.startswith("tcp://") and not os.environ.get("DOCKER_TLS_VERIFY"):
            name, _, port = host[len("tcp://"):].rstrip("/").rpartition(":")
            self.address, self.family = (name, int(port)), socket.AF_INET
        else:
            raise EngineError(f"DOCKER_HOST {host!r}: launcher run speaks to unix:// or plain "
                              f"tcp:// daemons")
        self.host = host

    def _send(self, method: str, url: str, body: bytes | None, headers: dict[str, str],
              timeout: float | None) -> Response:
        try:
            sock = socket.socket(self.family, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            sock.connect(self.address)
            lines = [f"{method} {url} HTTP/1.1", "Host: docker", *(f"{k}: {v}" for k, v in
                                                                    headers.items())]
            if body is not None:
                lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
            sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b""))
            return Response(sock)
        except OSError as exc:
            raise EngineError(unreachable(self.host, exc)) from None

    def request(self, method: str, path: str, body: Any = None, query: dict | None = None,
                timeout: float | None = 60.0) -> Any:
        url = API + path + ("?" + urlencode(query) if query else "")
        data = json.dumps(body).encode() if body is not None else None
        resp = self._send(method, url, data, {"Connection": "close"}, timeout)
        try:
            raw = resp.read()
        finally:
            resp.sock.close()
        if resp.status >= 400:
            raise ApiError(resp.status, _message(raw))
        if raw and resp.headers.get("content-type", "").startswith("application/json"):
            return json.loads(raw)
        return raw

    def ping(self) -> None:
        self.request("GET", "/_ping", timeout=10)

    def pull(self, image: str) -> Iterator[dict[str, Any]]:
        """POST /images/create: the daemon's progress messages, one dict each, as they come."""
        repo, tag = split_reference(image)
        resp = self._send("POST", f"{API}/images/create?" + urlencode(
            {"fromImage": repo, "tag": tag}), None, {"Connection": "close"}, None)
        try:
            if resp.status >= 400:
                raise ApiError(resp.status, _message(resp.read()))
            for line in resp.lines():
                if line.strip():
                    yield json.loads(line)
        finally:
            resp.sock.close()

    def attach(self, cid: str, stdin: bool = False,
               tty: bool = False) -> Iterator[tuple[int, bytes]]:
        """(stream, data) frames of stdout (1) and stderr (2) until the container ends. With
        `stdin`, the connection is also the container's stdin (never written to: with
        StdinOnce the daemon closes it when this connection drops, and the supervisor inside
        takes that end of file to mean that launcher is gone; a line written to it is
        launcher's word: `closed stdout`, a reader gone)."""
        resp = self._send("POST", f"{API}/containers/{cid}/attach?stream=1&stdout=1&stderr=1"
                                  f"&logs=1{'&stdin=1' if stdin else ''}", None,
                          {"Connection": "Upgrade", "Upgrade": "tcp"}, None)
        if resp.status not in (101, 200):
            raise EngineError(f"cannot attach to the container: {resp.read().decode().strip()}")
        self.attached = resp.sock  # the stdin side: launcher's word to the supervisor
        return resp.raw() if tty else resp.frames()

    def wait_stream(self, cid: str, condition: str = "next-exit") -> Response:
        """Register a wait before start, so no exit is missed; `.read()` gives the result.
        `removed`: the answer comes once an AutoRemove container is gone (docker run --rm)."""
        return self._send("POST", f"{API}/containers/{cid}/wait?condition={condition}", None,
                          {"Connection": "close"}, None)
