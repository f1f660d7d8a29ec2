"""What a profile key is: its kind, its words, whether `auto` or `unlimited` is allowed, its
bounds and any further check. A leaf, so that GPU vendors and frameworks can declare their own
keys (`profile_keys`), which profiles/schema.py adds to launcher's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

AUTO = "auto"
UNLIMITED = "unlimited"


@dataclass(frozen=True)
class Key:
    kind: str  # int | float | size | str | bool | choice | cpulist | strlist | env
    doc: str
    auto: bool = False
    unlimited: bool = False
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] = ()
    minimum: float = 1
    maximum: float | None = None
    known: Callable[[object], bool] | None = None  # membership without listing (registries)
    check: Callable[[Any], str | None] | None = None  # a further check: why a value is wrong

    def allowed(self) -> tuple[str, ...]:
        return self.choices() if callable(self.choices) else self.choices

    def accepts(self, value: object) -> bool:
        return self.known(value) if self.known is not None else value in self.allowed()
