"""One registry for every variant: engines, job backends, render targets, GPU vendors,
frameworks and workloads.

Entries come only from entry-point groups (`[project.entry-points."launcher.frameworks"]
onnx = "mypkg.onnx:FRAMEWORK"`); launcher's own are declared in its pyproject.toml the same
way, so every run takes the path a third party's takes, as repo2docker's engines do. An entry is
loaded only when first asked for, so `launcher --help` imports none of them. What differs between
entries is an attribute on what is loaded (a capability), never a name tested elsewhere.
Standard library only: the supervisor in images imports it.
"""

from __future__ import annotations

import importlib
from typing import Generic, TypeVar

from launcher.dists import EntryPoint, entry_points

T = TypeVar("T")


class UnknownEntry(KeyError):
    """A name no entry has; the message lists the known ones."""

    def __str__(self) -> str:
        return str(self.args[0])


class Registry(Generic[T]):
    def __init__(self, kind: str, group: str, default: str) -> None:
        self.kind = kind  # e.g. "framework", for messages
        self.group = group  # the entry-point group, e.g. "launcher.frameworks"
        self.default = default  # the attribute of an entry that names a bare module
        self._loaded: dict[str, T] = {}

    def entries(self) -> dict[str, EntryPoint]:
        """name -> entry point: launcher's own first, then third parties', each by name."""
        return entry_points(self.group)

    def names(self) -> tuple[str, ...]:
        return tuple(self.entries())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.entries()

    def get(self, name: str) -> T:
        entry = self.entries().get(name)
        if entry is None:
            raise UnknownEntry(f"unknown {self.kind} {name!r} (known: "
                               f"{', '.join(self.names())})")
        if entry.value not in self._loaded:  # by what it names: a later install may
            module, _, attr = entry.value.partition(":")  # give the name another entry
            self._loaded[entry.value] = getattr(importlib.import_module(module.strip()),
                                                attr.strip() or self.default)
        return self._loaded[entry.value]

    def provider(self, name: str) -> str | None:
        """The distribution that declares `name`, where it is not launcher itself."""
        from launcher.dists import OWN

        entry = self.entries().get(name)
        return entry.dist if entry is not None and entry.dist != OWN else None

    def loaded(self) -> list[T]:
        """Every entry, loaded (for a capability every entry may have)."""
        return [self.get(n) for n in self.names()]
