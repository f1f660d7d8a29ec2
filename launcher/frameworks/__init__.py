"""Frameworks as a registry (entry-point group `launcher.frameworks`). A module defines
`FRAMEWORK`, an instance of `launcher.frameworks.base.Framework`: what it imports, its thread
model, its calibration probe, its packages per GPU vendor and its facts for `doctor`. A new one
(onnxruntime, cupy) is one module and one entry-point line, launcher's own or a third party's."""

from __future__ import annotations

from launcher.frameworks.base import Framework
from launcher.registry import Registry

_registry: Registry[Framework] = Registry("framework", group="launcher.frameworks",
                                          default="FRAMEWORK")


def names() -> tuple[str, ...]:
    return _registry.names()


def known(name: str) -> bool:
    return name in _registry


def get(name: str) -> Framework:
    return _registry.get(name)


def origin(name: str) -> str:
    """Whose thread model a framework's is, for an estimate's source: launcher's own is
    "built-in", a third party's names its distribution."""
    dist = _registry.provider(name)
    return "built-in" if dist is None else f"{dist}'s"
