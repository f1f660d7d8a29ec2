"""One registry helper for every variant: engines, job backends, GPU vendors, frameworks.

An entry maps a name to `module:attribute` (or a module, whose `default` attribute is taken),
loaded only when first asked for, so `launcher --help` imports none of them. What differs
between entries is an attribute on what is loaded (a capability), never a name tested
elsewhere. Third parties add entries through a Python entry-point group
(`[project.entry-points."launcher.frameworks"] onnx = "mypkg.onnx:FRAMEWORK"`), as
repo2docker's engines do. Standard library only: the supervisor in images imports it.
"""

from __future__ import annotations

import importlib
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownEntry(KeyError):
    """A name no entry has; the message lists the known ones."""

    def __str__(self) -> str:
        return str(self.args[0])


class Registry(Generic[T]):
    def __init__(self, kind: str, entries: dict[str, str], default: str,
                 group: str | None = None) -> None:
        self.kind = kind  # e.g. "framework", for messages
        self.entries = entries  # name -> "module:attribute" or "module" (the caller's dict)
        self.default = default  # the attribute of a bare module entry
        self.group = group  # entry-point group for third-party entries
        self._plugins: dict[str, str] | None = None
        self._loaded: dict[tuple[str, str], T] = {}

    def _plugin_entries(self) -> dict[str, str]:
        if self._plugins is None:
            from launcher.dists import entry_points

            found = entry_points(self.group) if self.group else {}
            self._plugins = {k: v for k, v in found.items() if k not in self.entries}
        return self._plugins

    def names(self) -> tuple[str, ...]:
        """The built-in names in registry order, then any third party's."""
        return (*self.entries, *self._plugin_entries())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self.entries or
                                          name in self._plugin_entries())

    def get(self, name: str) -> T:
        target = self.entries.get(name) or self._plugin_entries().get(name)
        if target is None:
            raise UnknownEntry(f"unknown {self.kind} {name!r} (known: "
                               f"{', '.join(self.names())})")
        if (name, target) not in self._loaded:
            module, _, attr = target.partition(":")
            self._loaded[(name, target)] = getattr(importlib.import_module(module),
                                                   attr or self.default)
        return self._loaded[(name, target)]
