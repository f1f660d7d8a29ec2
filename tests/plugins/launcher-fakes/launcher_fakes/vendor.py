"""A made-up GPU vendor ("Example XPU"), registered as any vendor is: this module and one
entry-point line. Its GPUs are found under sys/class/example-xpu/ of a host tree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from launcher.checks import CheckInput
from launcher.vendors.base import Gpu, GpuAccess, GpuSelection, HostGpus, Vendor


def _one_queue_each(c: CheckInput) -> list[tuple[str, str]]:
    """Its own verdict check: its runtime drives at most 2 devices from one process."""
    if c.gpus > 2:
        return [("refuse", f"the XPU runtime drives at most 2 devices from one process "
                           f"(asked: {c.gpus}); run a process per device.")]
    return []


class ExampleXpu(Vendor):
    name = "xpu"
    label = "XPU"
    variables = {"XPU_VISIBLE_DEVICES": "devices the XPU runtime sees",
                 "XPU_QUEUE_MODE": "the runtime's queue mode"}
    host_groups = ("xpu",)
    k8s_resource = "example.com/xpu"
    template = "Dockerfile.xpu"  # its own, beside this module
    template_dir = Path(__file__).parent
    base_image = "example/xpu-runtime:1"
    requirements = {"torch": ["torch-xpu"], "none": []}
    checks = (_one_queue_each,)

    def detect(self, root: Path, use_tools: bool = False) -> list[Gpu]:
        base = root / "sys/class/example-xpu"
        if not base.is_dir():
            return []
        return [Gpu("xpu", i, (d / "name").read_text().strip())
                for i, d in enumerate(sorted(base.iterdir()))]

    def environment(self, selection: GpuSelection, gpu: dict[str, Any]) -> dict[str, str]:
        return {"XPU_QUEUE_MODE": "single"} if selection.ids else {}

    def sources(self) -> dict[str, str]:
        return {"XPU_QUEUE_MODE": "gpu.count"}

    def visible(self, ids: tuple[int, ...]) -> dict[str, str]:
        return {"XPU_VISIBLE_DEVICES": ",".join(map(str, ids))}

    def access(self, selection: GpuSelection, host: HostGpus) -> GpuAccess:
        groups = tuple(str(host.groups[g]) for g in self.host_groups if g in host.groups)
        return GpuAccess(tuple(f"/dev/xpu{i}" for i in selection.ids), groups)

    def sample(self, root: Path) -> list[dict[str, Any]]:
        return [{"vendor": "xpu", "gpu": g.index, "util_percent": 50}
                for g in self.detect(root)]


VENDOR = ExampleXpu()
