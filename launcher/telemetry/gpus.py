"""GPU memory and utilisation for telemetry, from every registered vendor (launcher/vendors/):
AMD through the amdgpu sysfs files, NVIDIA through NVML. [] where there is no GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from launcher.vendors import gpu_vendors


class GpuSampler:
    def __init__(self, root: Path = Path("/")) -> None:
        self.root = root
        self.vendors = [v for v in gpu_vendors() if v.sample(root)]

    @property
    def any(self) -> bool:
        return bool(self.vendors)

    def sample(self) -> list[dict[str, Any]]:
        return [row for v in self.vendors for row in v.sample(self.root)]
