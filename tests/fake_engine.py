"""A fake engine that records calls, for CLI tests only (never for behaviour an issue proves)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from launcher.runtime.engine import BuildEvent, Engine


class FakeEngine(Engine):
    name = "fake"

    def __init__(self, status: int = 0) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.status = status

    def ping(self) -> None:
        self.calls.append(("ping", None))

    def build(self, context: Path, tag: str, labels: dict[str, str], on_event,  # type: ignore[no-untyped-def]
              no_cache: bool = False) -> str:
        files = sorted(p.name for p in context.iterdir())
        self.calls.append(("build", {"tag": tag, "labels": labels, "files": files}))
        on_event(BuildEvent("step", "Step 1/1 : FROM scratch"))
        on_event(BuildEvent("done", "sha256:" + "0" * 64))
        return "sha256:" + "0" * 64

    def run(self, spec: dict[str, Any], on_output, on_start=None) -> int:  # type: ignore[no-untyped-def]
        self.calls.append(("run", spec))
        on_output("stdout", b"hello\n")
        return self.status
