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
from launcher.runtime.engine import BuildEvent, Engine, OutputSink

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
              on_event: Callable[[BuildEvent], None]) -> str:
        image_id = ""
        try:
            for chunk in self.client.api.build(path=str(context), tag=tag, labels=labels,
                                               decode=True, rm=True, forcerm=True):
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

    def run(self, spec: dict[str, Any], on_output: OutputSink) -> int:
        import docker.errors
        from docker.types import DeviceRequest, Ulimit

        kwargs = dict(spec)
        image, command = kwargs.pop("image"), kwargs.pop("command")
        kwargs["ulimits"] = [Ulimit(name=u["Name"], soft=u["Soft"], hard=u["Hard"])
                             for u in kwargs.get("ulimits", [])]
        if "device_requests" in kwargs:
            kwargs["device_requests"] = [
                DeviceRequest(driver=r.get("Driver", ""), count=r.get("Count", 0),
                              device_ids=r.get("DeviceIDs"), capabilities=r.get("Capabilities"))
                for r in kwargs["device_requests"]]
        try:
            container = self.client.containers.create(image, command, **kwargs)
        except docker.errors.ImageNotFound:
            raise EngineError(f"image {image!r} not found; build it with `launcher build` or "
                              f"pass --image") from None
        except docker.errors.APIError as exc:
            raise EngineError(f"the daemon refused the container: {_short(exc)}") from None
        stopping = threading.Event()

        def stop(signum: int, _frame: object) -> None:
            if stopping.is_set():  # a second Ctrl-C: do not wait any longer
                _quiet(lambda: container.kill())
                return
            stopping.set()
            _quiet(lambda: container.kill(signal=signal.Signals(signum).name))

        old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            stream = container.attach(stdout=True, stderr=True, stream=True, logs=True,
                                      demux=True)
            try:
                container.start()
            except docker.errors.APIError as exc:
                raise EngineError(f"the daemon could not start the container: "
                                  f"{_short(exc)}") from None
            for out, err in stream:
                if out:
                    on_output("stdout", out)
                if err:
                    on_output("stderr", err)
            status = container.wait()
            return int(status.get("StatusCode", 1))
        finally:
            for s, h in old.items():
                signal.signal(s, h)
            _quiet(lambda: container.remove(force=True))


def _quiet(fn: Callable[[], Any]) -> None:
    with contextlib.suppress(Exception):  # best effort during teardown
        fn()


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
