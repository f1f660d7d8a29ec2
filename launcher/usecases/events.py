"""What a use case tells the person at the terminal while it works: one line each, of a kind
the CLI shows its own way (stderr; notes only with -v; warnings labelled)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

Kind = Literal["say", "note", "warning", "step"]


@dataclass(frozen=True)
class Event:
    kind: Kind  # say: a line; note: changes nothing (-v); warning; step: the command's output
    text: str


OnEvent = Callable[[Event], None]


class Teller:
    """An `on_event` (or None: nothing is told) as calls by kind."""

    def __init__(self, on_event: OnEvent | None) -> None:
        self.on_event = on_event

    def __call__(self, kind: Kind, text: str) -> None:
        if self.on_event is not None:
            self.on_event(Event(kind, text))

    def say(self, text: str) -> None:
        self("say", text)

    def note(self, text: str) -> None:
        self("note", text)

    def warn(self, text: str) -> None:
        self("warning", text)
