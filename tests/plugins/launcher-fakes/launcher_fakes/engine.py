"""A fake engine that records calls, for CLI tests only (never for behaviour an issue proves).
It is registered like any engine: this module and one entry-point line of its distribution."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from launcher.runtime.engine import BuildEvent, Enforcement, Engine, RunResult, Started
from launcher.runtime.spec import RunSpec


class FakeEngine(Engine):
    name = "fake"
    can_build = True  # it records builds too
    calls: ClassVar[list[tuple[str, Any]]] = []  # shared: the registry makes new instances
    status: ClassVar[int] = 0

    def ping(self) -> None:
        self.calls.append(("ping", None))

    def image_exists(self, image: str | None) -> bool:
        return True

    def describe(self, spec: RunSpec) -> dict[str, Any]:
        return {"command": spec.command}

    def build(self, context: Path, tag: str, labels: dict[str, str], on_event,  # type: ignore[no-untyped-def]
              no_cache: bool = False) -> str:
        files = sorted(p.name for p in context.iterdir())
        texts = {name: (context / name).read_text() for name in ("Dockerfile", "caps.json")
                 if (context / name).is_file()}
        self.calls.append(("build", {"tag": tag, "labels": labels, "files": files,
                                     "texts": texts}))
        on_event(BuildEvent("step", "Step 1/1 : FROM scratch"))
        on_event(BuildEvent("done", "sha256:" + "0" * 64))
        return "sha256:" + "0" * 64

    def run(self, spec: RunSpec, on_output, on_start=None) -> RunResult:  # type: ignore[no-untyped-def]
        self.calls.append(("run", spec))
        enforcement = Enforcement({"pids": "recorded by the fake"})
        if on_start is not None:
            on_start(Started(None, enforcement))
        on_output("stdout", b"hello\n")
        on_output("stderr", b"launcher: the workload exited with its own status 3.\n")
        return RunResult(self.status, enforcement)
