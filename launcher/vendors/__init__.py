"""GPU vendors as a registry (entry-point group `launcher.vendors`): a vendor module defines
`VENDOR`, an instance of `launcher.vendors.base.Vendor`, and one entry-point line names it;
modules load when first asked for. Whether a vendor has GPUs is its `has_gpus`."""

from __future__ import annotations

from launcher.registry import Registry
from launcher.vendors.base import Vendor

AUTO = "auto"
_registry: Registry[Vendor] = Registry("GPU vendor", group="launcher.vendors", default="VENDOR")


def names() -> tuple[str, ...]:
    return _registry.names()


def known(name: str) -> bool:
    return name in _registry


def get(name: str) -> Vendor:
    return _registry.get(name)


def all_vendors() -> list[Vendor]:
    return _registry.loaded()


def no_gpu() -> str:
    """The vendor of no GPU (`has_gpus` false): a CPU run's, and `auto`'s on a host without."""
    return next(v.name for v in all_vendors() if not v.has_gpus)


def gpu_vendors() -> list[Vendor]:
    """Vendors that have GPUs to find."""
    return [v for v in all_vendors() if v.has_gpus]


def every_gpu_hidden() -> dict[str, str]:
    """Each vendor's variables that hide its GPUs from a process (a native run with none)."""
    return {k: v for vendor in gpu_vendors() for k, v in vendor.hidden().items()}


def resolve(name: str, found_vendors: list[str]) -> str:
    """The profile's gpu.vendor, with `auto` resolved to the first vendor whose GPUs the host
    shows (else `none`). The one place `auto` is resolved."""
    if name != AUTO:
        return name
    return found_vendors[0] if found_vendors else no_gpu()
