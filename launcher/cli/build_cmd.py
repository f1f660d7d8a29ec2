"""`launcher build`: the flags as a request to the build use case (launcher/usecases/build.py),
with live progress on the terminal."""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING

from launcher.cli.declare import command
from launcher.cli.output import show_event
from launcher.usecases.build import BuildRequest

if TYPE_CHECKING:
    from launcher.usecases.build import BuildEvent
    from launcher.usecases.events import Event

# A terminal's control sequences (the classic builder colours a step's stderr red).
_ESCAPES = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07]*\x07|[@-Z\\-_])")


class Progress:
    """Steps on their own lines; in a terminal, other output overwrites one status line.
    Control sequences from the build are dropped (they are no colour in a log)."""

    def __init__(self, stream=None) -> None:  # type: ignore[no-untyped-def]
        self.stream = stream or sys.stdout  # the one in force now, not at import
        self.tty = self.stream.isatty()
        self.width = 100

    def __call__(self, ev: BuildEvent) -> None:
        if ev.kind in ("done", "error"):  # an error ends the build with its own line
            return
        text = _ESCAPES.sub("", ev.text)
        if not self.tty:
            print(text, file=self.stream, flush=True)
            return
        if ev.kind == "output":
            self.stream.write("\r\x1b[2K  " + text[: self.width])
        else:
            self.stream.write("\r\x1b[2K" + text + "\n")
        self.stream.flush()

    def end(self) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()


def build(req: BuildRequest) -> int:
    from launcher.usecases.build import build as build_image

    progress = Progress()

    def step(event: Event) -> None:  # a step's line ends the status line first
        progress.end()
        show_event(event)

    try:
        build_image(req, on_progress=progress, on_event=step)
    finally:
        progress.end()
    return 0


COMMAND = command("build", BuildRequest, build, help="""Build an image that carries the
profile's caps in its entrypoint (it applies them even under a bare `docker run` or on RunPod),
with live progress.""")
