"""The container engine interface. Docker sits behind it; another backend (the docker CLI,
native processes, Ray) can replace it without a caller changing."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class BuildEvent:
    kind: str  # step | output | error | done
    text: str


OutputSink = Callable[[str, bytes], None]  # ("stdout" | "stderr", data)
StartHook = Callable[[int], None]  # the host PID of the supervisor, once it runs


class Engine(ABC):
    name = "engine"

    @abstractmethod
    def ping(self) -> None:
        """Raise EngineError with a helpful sentence when the engine does not answer."""

    @abstractmethod
    def build(self, context: Path, tag: str, labels: dict[str, str],
              on_event: Callable[[BuildEvent], None], no_cache: bool = False) -> str:
        """Build `context` as `tag`; stream events; return the image id."""

    notes: dict[str, Any] = {}  # what the engine enforced, for the run's summary

    @abstractmethod
    def run(self, spec: dict[str, Any], on_output: OutputSink,
            on_start: StartHook | None = None) -> int:
        """Start the workload under the spec's limits and stream its output; on Ctrl-C or
        SIGTERM stop it and clean up. Return the workload's exit status; leave nothing behind."""


_factory: Callable[[], Engine] | None = None


def set_engine_factory(factory: Callable[[], Engine] | None) -> None:
    """Tests install a fake here; None restores the real Docker engine."""
    global _factory
    _factory = factory


def get_engine(runtime: str = "docker") -> Engine:
    """`docker`, `native`, or `auto` (docker when a daemon answers, else native)."""
    if _factory is not None:
        return _factory()
    if runtime == "auto":
        from launcher.runtime.docker_api import DockerAPI

        try:
            DockerAPI().ping()
            runtime = "docker"
        except Exception:  # noqa: BLE001 - any failure means: no daemon here
            runtime = "native"
    if runtime == "native":
        from launcher.runtime.native import NativeEngine

        return NativeEngine()
    from launcher.runtime.docker_engine import DockerEngine

    return DockerEngine()
