"""Docker through the docker SDK (imported only here, only when a command needs it)."""

from __future__ import annotations

import contextlib
import re
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from launcher.errors import EngineError
from launcher.runtime.engine import BuildEvent, Engine, OutputSink, StartHook

_STEP = re.compile(r"^Step \d+/\d+ :")


class DockerEngine(Engine):
    name = "docker"

    def __init__(self) -> None:
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            import docker

            try:
                self._client = docker.from_env(timeout=600)
                self._client.ping()
            except Exception as exc:  # noqa: BLE001 - the SDK raises many kinds
                raise EngineError(
                    f"no Docker daemon answers ({_short(exc)}); start dockerd (or set "
                    f"DOCKER_HOST), or use --runtime native") from None
        return self._client

    def ping(self) -> None:
        _ = self.client

    def build(self, context: Path, tag: str, labels: dict[str, str],
              on_event: Callable[[BuildEvent], None], no_cache: bool = False) -> str:
        image_id = ""
        try:
            for chunk in self.client.api.build(path=str(context), tag=tag, labels=labels,
                                               decode=True, rm=True, forcerm=True,
                                               nocache=no_cache):
                if "error" in chunk:
                    on_event(BuildEvent("error", chunk["error"].strip()))
                    raise EngineError(f"build of {tag} failed: {chunk['error'].strip()}")
                if "stream" in chunk:
                    for line in chunk["stream"].splitlines():
                        if line.strip():
                            on_event(BuildEvent("step" if _STEP.match(line) else "output", line))
                aux = chunk.get("aux")
                if isinstance(aux, dict) and "ID" in aux:
                    image_id = aux["ID"]
        except EngineError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise EngineError(f"build of {tag} failed: {_short(exc)}") from None
        if not image_id:
            image_id = self.client.images.get(tag).id
        on_event(BuildEvent("done", image_id))
        return image_id

    def run(self, spec: dict[str, Any], on_output: OutputSink,
            on_start: StartHook | None = None) -> int:
        """Through the light API client (no SDK import): create with AutoRemove, attach and
        wait before start (as the docker CLI does), stream, and remove in any case."""
        import json

        from launcher.runtime.docker_api import ApiError, DockerAPI, create_body

        api = DockerAPI()
        body, query = create_body(spec)
        try:
            cid = api.request("POST", "/containers/create", body, query)["Id"]
        except ApiError as exc:
            if exc.status == 404:
                raise EngineError(f"image {spec['image']!r} not found; build it with `launcher "
                                  f"build` or pass --image") from None
            raise EngineError(f"the daemon refused the container: {exc}") from None
        stopping = threading.Event()

        def stop(signum: int, _frame: object) -> None:
            sig = "SIGKILL" if stopping.is_set() else signal.Signals(signum).name
            stopping.set()
            _quiet(lambda: api.request("POST", f"/containers/{cid}/kill", query={"signal": sig}))

        old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            frames = api.attach(cid)
            waiter = api.wait_stream(cid)
            try:
                api.request("POST", f"/containers/{cid}/start")
            except ApiError as exc:
                raise EngineError(f"the daemon could not start the container: {exc}") from None
            if on_start is not None:
                with contextlib.suppress(Exception):  # telemetry must not stop the run
                    on_start(int(api.request("GET", f"/containers/{cid}/json")["State"]["Pid"]))
            for stream, data in frames:
                on_output("stderr" if stream == 2 else "stdout", data)
            result = json.loads(waiter.read() or b"{}")
            return int(result.get("StatusCode", 1))
        finally:
            for s, h in old.items():
                signal.signal(s, h)
            _quiet(lambda: api.request("DELETE", f"/containers/{cid}", query={"force": "1"}))


def _quiet(fn: Callable[[], Any]) -> None:
    with contextlib.suppress(Exception):  # best effort during teardown
        fn()


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
