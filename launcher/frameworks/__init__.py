"""Frameworks as a registry: one module per framework, one line here. A module defines
`FRAMEWORK`, an instance of `launcher.frameworks.base.Framework`: what it imports, its thread
model, its calibration probe, its packages per GPU vendor and its facts for `doctor`. A new one
(onnxruntime, cupy) is one module and one line, or a third party's `launcher.frameworks`
entry point."""

from __future__ import annotations

from launcher.frameworks.base import Framework
from launcher.registry import Registry

# name -> module defining FRAMEWORK. A new framework is one module and one line here.
REGISTRY: dict[str, str] = {
    "torch": "launcher.frameworks.torch",
    "tf": "launcher.frameworks.tf",
    "jax": "launcher.frameworks.jax",
    "none": "launcher.frameworks.none",
}
_registry: Registry[Framework] = Registry("framework", REGISTRY, default="FRAMEWORK",
                                          group="launcher.frameworks")


def names() -> tuple[str, ...]:
    return _registry.names()


def known(name: str) -> bool:
    return name in _registry


def get(name: str) -> Framework:
    return _registry.get(name)
