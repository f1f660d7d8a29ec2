"""A chunk's growth, where the profile asks for the stop (`growth.stop`): its output marks its
cycles, its telemetry goes to the chunk's folder, and it is stopped at the start of the cycle
that growth would take past a limit. The runner then tries it again in a fresh process (a
stopped chunk is an attempt, like a failed one), with the stop's words as its diagnosis."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from launcher.caps.resolve import Resolved
from launcher.runtime.engine import Started
from launcher.telemetry.growth_watch import STOPPED_STATUS, GrowthOptions, GrowthWatch


class ChunkGrowth:
    def __init__(self, r: Resolved, folder: Path, say: Callable[[str], None]) -> None:
        self.r, self.folder = r, folder
        self.watch = GrowthWatch(GrowthOptions.of(r.profile), lambda line: say(
            f"launcher: {line}\n"))
        self.sampler: Any = None
        self.out: IO[str] | None = None

    @classmethod
    def wanted(cls, r: Resolved, folder: Path,
               say: Callable[[str], None]) -> ChunkGrowth | None:
        """One where the profile asks for the stop; `say` takes its lines (the chunk's log)."""
        return cls(r, folder, say) if r.profile.get("growth.stop") else None

    def started(self, info: Started) -> None:
        from launcher.telemetry.watch import watched_sampler

        if info.pid is None:
            return
        self.out = (self.folder / "telemetry.jsonl").open("w")  # this attempt's
        self.sampler = watched_sampler(info, self.r.facts, self.out, self.watch)

    def output(self, stream: str, data: bytes) -> None:
        self.watch.output(stream, data)

    def ended(self) -> tuple[int, str] | None:
        """(75, why) when the chunk was stopped before a limit; None otherwise."""
        self.watch.close()
        if self.sampler is not None:
            self.sampler.stop()
        if self.out is not None:
            self.out.close()
        stopped = self.watch.stopped
        if stopped is None:
            return None
        return STOPPED_STATUS, f"{stopped['why']}."
