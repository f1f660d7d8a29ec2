"""NVIDIA: nvidia-smi or /proc/driver/nvidia to find GPUs, the container toolkit's device
request and variables (NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES),
CUDA_VISIBLE_DEVICES on the host, NVML for telemetry."""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

from launcher.keys import Key
from launcher.threadpools import ThreadPool
from launcher.vendors.base import DeviceRequest, Gpu, GpuAccess, GpuSelection, HostGpus, Vendor

DEFAULT_CAPABILITIES = "compute,utility"
PROC_GPUS = "proc/driver/nvidia/gpus"  # one folder per GPU, named by its PCI bus id


def _information(root: Path) -> list[dict[str, str]]:
    """Each GPU's /proc/driver/nvidia/gpus/BUS/information as its fields ("Model", "Device
    Minor"), in PCI bus order (nvidia-smi's and CUDA_DEVICE_ORDER=PCI_BUS_ID's); a GPU whose
    file cannot be read has none. [] where the driver shows no GPU."""
    base = root / PROC_GPUS
    if not base.is_dir():
        return []
    out = []
    for d in sorted(base.iterdir()):
        fields: dict[str, str] = {}
        try:
            for line in (d / "information").read_text().splitlines():
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
        except OSError:
            pass
        out.append(fields)
    return out


class Nvidia(Vendor):
    name = "nvidia"
    # measured on an H200 (torch 2.11+cu130, jax 0.11.2, NCCL 2.28.9), 2026-11-26: the
    # driver's two threads per process; NCCL's own are unnamed unless NCCL_SET_THREAD_NAME=1
    thread_pools = (
        ThreadPool(r"cuda[0-9a-f]{6,}$", "CUDA driver"),
        ThreadPool(r"cuda-EvtHandlr$", "CUDA event handler"),
        ThreadPool(r"NCCL", "NCCL", "destroy each cycle's process groups "
                   "(torch.distributed.destroy_process_group) before the next"),
    )
    label = "NVIDIA"
    profile_keys = {"driver_capabilities": Key(
        "str", "NVIDIA: NVIDIA_DRIVER_CAPABILITIES (default compute,utility)")}
    variables = {
        "NVIDIA_VISIBLE_DEVICES": "GPUs the NVIDIA container runtime exposes",
        "NVIDIA_DRIVER_CAPABILITIES": "driver libraries mounted (compute,utility)",
        "CUDA_VISIBLE_DEVICES": "GPUs CUDA sees",
    }
    k8s_resource = "nvidia.com/gpu"
    template = "Dockerfile.cuda"
    base_image = "nvidia/cuda:13.0.0-cudnn-runtime-ubuntu24.04"  # CUDA 13, driver 580+
    python = "3.12"  # Ubuntu 24.04's
    driver_module = "nvidia"
    gpu_build = "cuda"

    def detect(self, root: Path, use_tools: bool = False) -> list[Gpu]:
        if use_tools:
            found = _nvidia_smi()
            if found is not None:
                return found
        return [Gpu("nvidia", i, info.get("Model") or "NVIDIA GPU")
                for i, info in enumerate(_information(root))]

    def environment(self, selection: GpuSelection, gpu: dict[str, Any]) -> dict[str, str]:
        if not selection.ids:
            return {}
        return {"NVIDIA_VISIBLE_DEVICES": "all" if selection.all else
                ",".join(map(str, selection.ids)),
                "NVIDIA_DRIVER_CAPABILITIES": gpu.get("driver_capabilities") or
                DEFAULT_CAPABILITIES}

    def sources(self) -> dict[str, str]:
        return {"NVIDIA_VISIBLE_DEVICES": "gpu.count",
                "NVIDIA_DRIVER_CAPABILITIES": "gpu.driver_capabilities|NVIDIA container "
                                              f"toolkit: {DEFAULT_CAPABILITIES}"}

    def visible(self, ids: tuple[int, ...]) -> dict[str, str]:
        return {"CUDA_VISIBLE_DEVICES": ",".join(map(str, ids))}

    def hidden(self) -> dict[str, str]:
        return {"CUDA_VISIBLE_DEVICES": ""}

    container_only = ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES")

    def device_nodes(self, request: DeviceRequest, root: Path) -> list[str] | None:
        """The control nodes and each GPU's /dev/nvidiaN (all, or the ids asked for); the
        driver's libraries are the image's (or the host's, mounted)."""
        dev = root / "dev"
        gpus = sorted((f for f in dev.glob("nvidia[0-9]*") if f.name[6:].isdigit()),
                      key=lambda f: int(f.name[6:]))
        if request.ids is not None:  # a GPU's index (NVML's, in PCI order) is not its minor
            # each GPU's index -> its /dev/nvidiaN minor, as the driver numbered them
            minors = {str(i): m for i, info in enumerate(_information(root))
                      for m in (info.get("Device Minor", ""),) if m.isdigit()}
            wanted = {minors.get(i, i) for i in request.ids}
            gpus = [f for f in gpus if f.name[6:] in wanted]
        if not gpus:
            return None
        control = [dev / n for n in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools",
                                     "nvidia-modeset")]
        return [str(f) for f in [*control, *gpus] if f.exists()]

    def access(self, selection: GpuSelection, host: HostGpus) -> GpuAccess:
        if not selection.ids:
            return GpuAccess()
        ids = None if selection.all else tuple(str(i) for i in selection.ids)
        return GpuAccess(request=DeviceRequest("nvidia", ids, ("gpu",)))

    def sample(self, root: Path) -> list[dict[str, Any]]:
        return _NVML.sample() if str(root) == "/" else []


def _nvidia_smi() -> list[Gpu] | None:
    import shutil
    import subprocess

    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,name,memory.total",
                              "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
        gpus = []
        for line in out.splitlines():
            idx, name, mem = (f.strip() for f in line.split(","))
            gpus.append(Gpu("nvidia", int(idx), name, int(float(mem)) * 1024 * 1024))
        return gpus
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


class _Util(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class _Mem(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


class _Nvml:
    """A handful of NVML calls through ctypes (nvidia-smi would cost a process per sample);
    loaded on first use, and only once."""

    def __init__(self) -> None:
        self.lib: Any = None
        self.tried = False

    def _load(self) -> Any:
        if not self.tried:
            self.tried = True
            try:
                lib = ctypes.CDLL("libnvidia-ml.so.1")
                if lib.nvmlInit_v2() == 0:
                    self.lib = lib
            except OSError:
                pass
        return self.lib

    def sample(self) -> list[dict[str, Any]]:
        lib = self._load()
        if lib is None:
            return []
        count = ctypes.c_uint()
        if lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
            return []
        out = []
        for i in range(count.value):
            handle = ctypes.c_void_p()
            util, mem = _Util(), _Mem()
            if (lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle)) != 0
                    or lib.nvmlDeviceGetUtilizationRates(handle, ctypes.byref(util)) != 0
                    or lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(mem)) != 0):
                continue
            out.append({"vendor": "nvidia", "gpu": i, "util_percent": util.gpu,
                        "mem_used_bytes": mem.used, "mem_total_bytes": mem.total})
        return out


_NVML = _Nvml()
VENDOR = Nvidia()
