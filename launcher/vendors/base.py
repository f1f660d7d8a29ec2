"""What every GPU vendor module provides, in launcher's own neutral terms.

A vendor knows how to find its GPUs on a host, which variables it manages, what a container
needs to reach the chosen GPUs (devices, groups, a device request), what makes exactly some
GPUs visible to a plain process, the Kubernetes resource name, the image it builds on, and how
to sample its GPUs for telemetry. Standard library only: the supervisor in images imports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launcher.checks import Check
from launcher.defaults import NONE
from launcher.keys import Key
from launcher.threadpools import ThreadPool


@dataclass(frozen=True)
class Gpu:
    vendor: str
    index: int
    model: str
    memory: int | None = None  # bytes
    gfx_target: str | None = None  # AMD, e.g. gfx1032
    render_node: str | None = None  # AMD, e.g. /dev/dri/renderD128


@dataclass(frozen=True)
class GpuSelection:
    """The GPUs a run or a service gets: a vendor and device indices (`all`: every one)."""

    vendor: str = NONE
    ids: tuple[int, ...] = ()
    all: bool = False
    shortfall: str | None = None  # what this host lacks of it (a real run refuses)

    @property
    def count(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class DeviceRequest:
    """A runtime hook that injects GPUs (the NVIDIA container toolkit)."""

    driver: str
    ids: tuple[str, ...] | None  # None: all
    capabilities: tuple[str, ...] = ("gpu",)


@dataclass(frozen=True)
class GpuAccess:
    """What a container needs to use the selected GPUs, in neutral terms that each engine and
    renderer translates: device files mapped at the same path (read, write, mknod),
    supplementary groups, whether the syscall filter must be off (ROCm's kfd ioctls), and a
    request for the vendor's toolkit to inject GPUs."""

    devices: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    unconfined_syscalls: bool = False
    request: DeviceRequest | None = None


@dataclass(frozen=True)
class HostGpus:
    """The host facts a vendor needs to reach its GPUs."""

    gpus: tuple[Gpu, ...] = ()
    groups: dict[str, int] = field(default_factory=dict)  # group name -> numeric GID


class Vendor:
    name = "vendor"
    label = "GPU"
    has_gpus = True  # False: the vendor of no GPU (a CPU run), what `auto` falls back to
    profile_keys: dict[str, Key] = {}  # its own keys under the profile's `gpu` section
    variables: dict[str, str] = {}  # managed variables this vendor sets or reads, and why
    host_groups: tuple[str, ...] = ()  # /etc/group entries to read for this vendor
    k8s_resource: str | None = None  # extended resource in a pod's limits
    template = "Dockerfile.cpu"  # its image's template: in template_dir, else launcher's images/
    template_dir: Path | None = None  # a third party's own templates (they may extend
    # launcher's "Dockerfile.base")
    base_image = "python:3.11-slim-bookworm"
    python = "3.11"  # the base image's Python: the framework pins must resolve for it
    # framework -> the image's framework layer, for frameworks whose module does not list this
    # vendor (each framework module lists its packages for the vendors it knows)
    requirements: dict[str, list[str]] = {}
    # the framework build its GPUs take, as Installed.build names it (cuda | rocm | cpu): a
    # framework picks its build's own variables by it
    gpu_build = "cpu"
    thread_pools: tuple[ThreadPool, ...] = ()  # its runtime's threads by name, for the census
    checks: tuple[Check, ...] = ()  # its own verdict checks (launcher/checks.py)

    def detect(self, root: Path, use_tools: bool = False) -> list[Gpu]:
        """This vendor's GPUs under `root` (a live host when `use_tools`)."""
        return []

    def device_nodes(self, request: DeviceRequest, root: Path) -> list[str] | None:
        """Its device request as the device nodes under `root` a container needs, for an
        engine with no hook for the request (Podman without a CDI spec); None: none found,
        or the vendor has no such fallback."""
        return None

    def environment(self, selection: GpuSelection, gpu: dict[str, Any]) -> dict[str, str]:
        """Variables the image or container sets for `selection`; `gpu` is the profile's gpu
        section. Each value's source is the profile key named by `sources`."""
        return {}

    def sources(self) -> dict[str, str]:
        """Variable -> the profile key (gpu.*) or the fixed default it comes from."""
        return {}

    def visible(self, ids: tuple[int, ...]) -> dict[str, str]:
        """Variables that make exactly `ids` visible to a process on the host (no container)."""
        return {}

    def hidden(self) -> dict[str, str]:
        """Variables that make none of this vendor's GPUs visible to a process on the host."""
        return {}

    # Variables only a container runtime reads: a native run keeps the values it inherited
    # (a pod's NVIDIA_VISIBLE_DEVICES=0 is never widened to all).
    container_only: tuple[str, ...] = ()

    def access(self, selection: GpuSelection, host: HostGpus) -> GpuAccess:
        return GpuAccess()

    driver_module = ""  # the kernel module whose /sys/module/NAME/version is the driver's

    def driver_version(self, root: Path) -> str | None:
        """The kernel driver's version (a calibration of the GPU side is per driver)."""
        try:
            return (root / "sys/module" / self.driver_module / "version").read_text().strip()
        except OSError:
            return None

    def sample(self, root: Path) -> list[dict[str, Any]]:
        """GPU memory and utilisation, cheap enough for 1 Hz; [] when none is found."""
        return []
