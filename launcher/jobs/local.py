"""The local backend: the plan's slots on this machine (one per GPU that runs, or the CPU
slots), each chunk through this machine's engine (a native process or a container)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from launcher.defaults import NATIVE
from launcher.jobs.execute import LocalExecutor
from launcher.jobs.job import Prepared
from launcher.jobs.runner import Slot
from launcher.runtime.engines import get_engine


class LocalBackend:
    name = "local"
    on_this_host = True  # chunks run on this machine (its GPUs, its leftovers)

    def __init__(self, p: Prepared, folder: Path, items: list[str] | None,
                 options: dict[str, Any]) -> None:
        self.p = p
        engine = get_engine(options.get("runtime") or NATIVE)
        engine.ping()
        image = options.get("image") or p.spec.image
        if not image:  # as `launcher run` does; an engine that runs no image ignores it
            from launcher.render.images import default_tag

            image = default_tag(p.resolved.profile.name, p.resolved.framework)
        # chunks run in the spec's folder: its command's relative paths are the spec's
        self._executor = LocalExecutor(p.spec, p.resolved, engine=engine, folder=folder,
                                       image=image, cwd=p.spec.path.resolve().parent,
                                       items=items)

    def slots(self) -> list[Slot]:
        return [Slot(f"slot{i}", gpu) for i, gpu in enumerate(self.p.plan.gpus)]

    def executor(self) -> LocalExecutor:
        return self._executor

    def concurrency_note(self) -> str:
        return self.p.plan.sentence()

    def close(self) -> None:
        return None
