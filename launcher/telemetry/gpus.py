"""GPU memory and utilisation for telemetry, cheap enough for 1 Hz.

AMD: the amdgpu driver's sysfs files (gpu_busy_percent, mem_info_vram_used/total). NVIDIA: NVML
through ctypes (libnvidia-ml.so.1, shipped with the driver); nvidia-smi would cost a process
start per sample. Both return [] where there is no such GPU.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any


def amd_gpus(root: Path = Path("/")) -> list[dict[str, Any]]:
    out = []
    for card in sorted((root / "sys/class/drm").glob("card[0-9]*")):
        dev = card / "device"
        busy = dev / "gpu_busy_percent"
        if not busy.exists():
            continue
        try:
            out.append({"gpu": len(out), "util_percent": int(busy.read_text()),
                        "mem_used_bytes": int((dev / "mem_info_vram_used").read_text()),
                        "mem_total_bytes": int((dev / "mem_info_vram_total").read_text())})
        except (OSError, ValueError):
            continue
    return out


class _Util(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class _Mem(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


class Nvml:
    """A handful of NVML calls; `available` is False without the driver."""

    def __init__(self) -> None:
        self.lib: Any = None
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() == 0:
                self.lib = lib
        except OSError:
            pass

    @property
    def available(self) -> bool:
        return self.lib is not None

    def sample(self) -> list[dict[str, Any]]:
        if self.lib is None:
            return []
        count = ctypes.c_uint()
        if self.lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
            return []
        out = []
        for i in range(count.value):
            handle = ctypes.c_void_p()
            util, mem = _Util(), _Mem()
            if (self.lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle)) != 0
                    or self.lib.nvmlDeviceGetUtilizationRates(handle, ctypes.byref(util)) != 0
                    or self.lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(mem)) != 0):
                continue
            out.append({"gpu": i, "util_percent": util.gpu, "mem_used_bytes": mem.used,
                        "mem_total_bytes": mem.total})
        return out


class GpuSampler:
    def __init__(self, root: Path = Path("/")) -> None:
        self.root = root
        self.nvml = Nvml() if str(root) == "/" else None
        self.has_amd = bool(amd_gpus(root))

    @property
    def any(self) -> bool:
        return self.has_amd or bool(self.nvml and self.nvml.available)

    def sample(self) -> list[dict[str, Any]]:
        rows = self.nvml.sample() if self.nvml else []
        return rows + (amd_gpus(self.root) if self.has_amd else [])
