"""Frameworks as a registry: one module per framework, one line here. A module defines
`FRAMEWORK`, an instance of `launcher.frameworks.base.Framework`: what it imports, its thread
model, its calibration probe, its packages per GPU vendor and its facts for `doctor`. A new one
(onnxruntime, cupy) is one module and one line, or a third party's `launcher.frameworks`
entry point."""

from __future__ import annotations

from launcher.frameworks.base import Framework
from launcher.registry import Registry

REGISTRY: Registry[Framework] = Registry("framework", {
    "torch": "launcher.frameworks.torch",
    "tf": "launcher.frameworks.tf",
    "jax": "launcher.frameworks.jax",
    "none": "launcher.frameworks.none",
}, default="FRAMEWORK", group="launcher.frameworks")


def names() -> tuple[str, ...]:
    return REGISTRY.names()


def get(name: str) -> Framework:
    return REGISTRY.get(name)
