"""A made-up job backend ("inline": each chunk is a function call in the driver, one at a time),
registered as any backend is: this module and one entry-point line. The ledger, the pull queue
and the summary stay launcher's."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from launcher.flags import Flag
from launcher.jobs.execute import Outcome
from launcher.jobs.job import Prepared
from launcher.jobs.ledger import Chunk
from launcher.jobs.runner import Slot


class InlineExecutor:
    def __init__(self, folder: Path, stamp: str | None) -> None:
        self.folder, self.stamp = folder, stamp

    def execute(self, chunk: Chunk, gpu: int | None, stopping: threading.Event) -> Outcome:
        out = self.folder / "inline" / f"{chunk.id:05d}.txt"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(f"{chunk.start} {chunk.end}" + (f" {self.stamp}" if self.stamp else "")
                       + "\n")
        return Outcome(0, "done inline.")

    def stop_all(self, sig: int = 15) -> None:
        return None


class InlineBackend:
    name = "inline"
    on_this_host = True
    # its own option of `jobs run`, declared here alone (launcher adds it to the command)
    flags = {"stamp": Flag(("--inline-stamp",), "A word written beside each chunk's items.")}

    def __init__(self, p: Prepared, folder: Path, items: list[str] | None,
                 options: dict[str, Any]) -> None:
        self._executor = InlineExecutor(folder, options.get("stamp"))

    def slots(self) -> list[Slot]:
        return [Slot("inline", None)]

    def executor(self) -> InlineExecutor:
        return self._executor

    def concurrency_note(self) -> str:
        return "one chunk at a time, inline"

    def close(self) -> None:
        return None
