"""GPU vendors as a registry: one module per vendor, one line here. A vendor module defines
`VENDOR`, an instance of `launcher.vendors.base.Vendor`; modules load when first asked for."""

from __future__ import annotations

from launcher.registry import Registry
from launcher.vendors.base import Vendor

# name -> module defining VENDOR. A new vendor (Intel XPU, say) is one module and one line.
REGISTRY: dict[str, str] = {
    "nvidia": "launcher.vendors.nvidia",
    "amd": "launcher.vendors.amd",
    "none": "launcher.vendors.none",
}
AUTO = "auto"


_registry: Registry[Vendor] = Registry("GPU vendor", REGISTRY, default="VENDOR",
                                       group="launcher.vendors")


def names() -> tuple[str, ...]:
    return _registry.names()


def known(name: str) -> bool:
    return name in _registry


def get(name: str) -> Vendor:
    return _registry.get(name)


def all_vendors() -> list[Vendor]:
    return [get(n) for n in names()]


def gpu_vendors() -> list[Vendor]:
    """Vendors that have GPUs to find (every one but `none`)."""
    return [v for v in all_vendors() if v.name != "none"]


def every_gpu_hidden() -> dict[str, str]:
    """Each vendor's variables that hide its GPUs from a process (a native run with none)."""
    return {k: v for vendor in gpu_vendors() for k, v in vendor.hidden().items()}


def resolve(name: str, found_vendors: list[str]) -> str:
    """The profile's gpu.vendor, with `auto` resolved to the first vendor whose GPUs the host
    shows (else `none`). The one place `auto` is resolved."""
    if name != AUTO:
        return name
    return found_vendors[0] if found_vendors else "none"
