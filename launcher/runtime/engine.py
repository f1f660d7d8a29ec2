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


class Engine(ABC):
    name = "engine"

    @abstractmethod
    def ping(self) -> None:
        """Raise EngineError with a helpful sentence when the engine does not answer."""

    @abstractmethod
    def build(self, context: Path, tag: str, labels: dict[str, str],
              on_event: Callable[[BuildEvent], None]) -> str:
        """Build `context` as `tag`; stream events; return the image id."""

    @abstractmethod
    def run(self, spec: dict[str, Any], on_output: OutputSink) -> int:
        """Create, start and stream a container; on Ctrl-C or SIGTERM stop and remove it.
        Return the container's exit status; never leave the container behind."""


_factory: Callable[[], Engine] | None = None


def set_engine_factory(factory: Callable[[], Engine] | None) -> None:
    """Tests install a fake here; None restores the real Docker engine."""
    global _factory
    _factory = factory


def get_engine() -> Engine:
    if _factory is not None:
        return _factory()
    from launcher.runtime.docker_engine import DockerEngine

    return DockerEngine()
