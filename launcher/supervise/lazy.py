"""The watch, started at the workload's first output or a moment after its start: its imports
(psutil, the growth fit) cost the supervisor ~70 ms, which a run that is over by then and
said nothing (`-- true`, a quick check) should not pay at its start or its end; such a run
gets its record without the fit."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from launcher.telemetry.watch_settings import WatchSettings

START_AFTER_S = 0.25  # after the workload's start
EARLY_MAX = 1 << 18  # bytes of output kept for the watch until it starts


class LazyWatcher:
    def __init__(self, settings: WatchSettings, command: list[str],
                 say: Callable[[str], None], environ: dict[str, str]) -> None:
        self.settings, self.command, self.say = settings, command, say
        self.environ = environ  # the supervisor's: where the record goes
        self.watcher: Any = None  # watcher.Watcher, once started
        self.failed = False
        self.early: list[tuple[str, bytes, float]] = []  # with the moment each was read
        self.kept = 0
        self.pid = 0
        self.cgroups: list[str] = []
        self.started = time.monotonic()
        self.wall = time.time()

    def output(self, stream: str, data: bytes) -> None:
        """The workload's first words start the watch (already passed on: the imports delay
        no line), so its first cycles are marked as they come."""
        came = time.monotonic()  # (before the start's imports: its moment, for the cycles)
        if self.watcher is None and not self.failed and self.pid:
            self._start()
        if self.watcher is not None:
            self.watcher.output(stream, data, came)
        elif self.kept < EARLY_MAX and not self.failed:
            self.early.append((stream, data[:EARLY_MAX - self.kept], time.monotonic()))
            self.kept += len(self.early[-1][1])

    def spawned(self, pid: int, cgroups: list[str]) -> None:
        self.pid, self.cgroups = pid, cgroups
        self.started, self.wall = time.monotonic(), time.time()

    def tick(self) -> float:
        if self.watcher is None and not self.failed:
            wait = self.started + START_AFTER_S - time.monotonic()
            if wait > 0:
                return wait
            self._start()
        return self.watcher.tick() if self.watcher is not None else 1.0

    def _start(self) -> None:
        from launcher.supervise.watcher import Watcher

        try:
            self.watcher = Watcher.begin(self.environ, self.command, self.say,
                                         self.settings)
            self.watcher.started = self.wall
            self.watcher.start(self.pid, self.cgroups)
            for stream, data, came in self.early:  # as they came: two cycles' lines
                self.watcher.output(stream, data, came)  # read before and during the start
                # are two boundaries, not one burst
        except Exception as exc:  # noqa: BLE001 - the workload runs on, unwatched
            self.failed, self.watcher = True, None
            self.say(f"warning: growth is not watched in this run ({type(exc).__name__}: "
                     f"{exc})")
        self.early = []

    def exited(self) -> None:
        if self.watcher is not None:
            self.watcher.exited()

    def finish(self, code: int, sentence: str, ended: dict[str, Any],
               extra: dict[str, Any]) -> tuple[int, str, dict[str, Any] | None, str | None]:
        """(the exit status, the sentence, the growth record, the record's folder)."""
        if self.watcher is None and not self.failed:
            if code == 0:  # over before the watch began, and well: its record, no fit
                from launcher.supervise.watcher import quick_record

                folder = quick_record(self.environ, self.command, self.settings,
                                      code, sentence, self.wall, extra)
                return code, sentence, None, folder
            self._start()  # a failure: its words are read, whatever it costs
        if self.watcher is None:
            return code, sentence, None, None
        status, sentence, record = self.watcher.finish(code, sentence, ended, extra)
        folder = self.watcher.folder
        return status, sentence, record, str(folder) if folder is not None else None
