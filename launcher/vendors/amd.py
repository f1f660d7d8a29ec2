"""AMD ROCm: the kfd topology to find GPUs, /dev/kfd plus one render node per GPU, groups
video and render, seccomp=unconfined (AMD's container docs), ROCR/HIP_VISIBLE_DEVICES on the
host, and the amdgpu sysfs files for telemetry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from launcher.keys import Key
from launcher.threadpools import ThreadPool
from launcher.vendors.base import Gpu, GpuAccess, GpuSelection, HostGpus, Vendor


class Amd(Vendor):
    name = "amd"
    # ROCm's runtime starts two per context (librocdxg#60); not measured here
    thread_pools = (ThreadPool(r"AsyncEventsLoop", "ROCm events"),)
    label = "AMD"
    variables = {
        "ROCR_VISIBLE_DEVICES": "GPUs ROCm sees",
        "HIP_VISIBLE_DEVICES": "GPUs HIP sees",
        "HSA_OVERRIDE_GFX_VERSION": "ROCm ISA override (10.3.0 for gfx1032)",
    }
    gpu_build = "rocm"
    profile_keys = {"gfx_version": Key("str", "AMD: HSA_OVERRIDE_GFX_VERSION (10.3.0 for "
                                              "gfx1032, RX 6600)")}
    host_groups = ("video", "render")
    k8s_resource = "amd.com/gpu"
    template = "Dockerfile.rocm"
    base_image = "rocm/dev-ubuntu-24.04:6.4.1"
    python = "3.12"  # Ubuntu 24.04's (22.04's 3.10 is too old for jax 0.10)
    driver_module = "amdgpu"

    def detect(self, root: Path, use_tools: bool = False) -> list[Gpu]:
        if not (root / "dev/kfd").exists():
            return []
        nodes = root / "sys/class/kfd/kfd/topology/nodes"
        if not nodes.is_dir():
            return []
        gpus = []
        for d in sorted(nodes.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else 0):
            props = _props(d / "properties")
            if not props.get("simd_count") or not props.get("gfx_target_version"):
                continue  # a CPU node
            minor = props.get("drm_render_minor")
            name_file = d / "name"
            model = name_file.read_text().strip() if name_file.exists() else "AMD GPU"
            mem = _props(d / "mem_banks/0/properties").get("size_in_bytes")
            gpus.append(Gpu("amd", len(gpus), model or "AMD GPU", mem,
                            gfx_name(props["gfx_target_version"]),
                            f"/dev/dri/renderD{minor}" if minor else None))
        return gpus

    def environment(self, selection: GpuSelection, gpu: dict[str, Any]) -> dict[str, str]:
        version = gpu.get("gfx_version")
        return {"HSA_OVERRIDE_GFX_VERSION": version} if version and selection.ids else {}

    def sources(self) -> dict[str, str]:
        return {"HSA_OVERRIDE_GFX_VERSION": "gpu.gfx_version"}

    def visible(self, ids: tuple[int, ...]) -> dict[str, str]:
        # ROCR filters first and renumbers what is left from 0; HIP then picks among those,
        # so HIP gets 0..n-1 (a HIP_VISIBLE_DEVICES inherited from Ray would name a GPU that
        # is no longer there).
        return {"ROCR_VISIBLE_DEVICES": ",".join(map(str, ids)),
                "HIP_VISIBLE_DEVICES": ",".join(str(i) for i in range(len(ids)))}

    def hidden(self) -> dict[str, str]:
        return {"ROCR_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""}

    def access(self, selection: GpuSelection, host: HostGpus) -> GpuAccess:
        if not selection.ids:
            return GpuAccess()
        devices = ["/dev/kfd"]
        if selection.all:
            devices.append("/dev/dri")
        else:
            nodes = {g.index: g.render_node for g in host.gpus if g.vendor == "amd"}
            devices += [nodes.get(i) or f"/dev/dri/renderD{128 + i}" for i in selection.ids]
        render = host.groups.get("render")
        groups = ("video", *((str(render),) if render is not None else ()))
        return GpuAccess(tuple(devices), groups, unconfined_syscalls=True)

    def sample(self, root: Path) -> list[dict[str, Any]]:
        out = []
        for card in sorted((root / "sys/class/drm").glob("card[0-9]*")):
            dev = card / "device"
            busy = dev / "gpu_busy_percent"
            if not busy.exists():
                continue
            try:
                out.append({"vendor": "amd", "gpu": len(out),
                            "util_percent": int(busy.read_text()),
                            "mem_used_bytes": int((dev / "mem_info_vram_used").read_text()),
                            "mem_total_bytes": int((dev / "mem_info_vram_total").read_text())})
            except (OSError, ValueError):
                continue
        return out


def gfx_name(version: int) -> str:
    """kfd gfx_target_version 100302 -> 'gfx1032'."""
    major, minor, step = version // 10000, (version // 100) % 100, version % 100
    return f"gfx{major}{minor:x}{step:x}"


def _props(path: Path) -> dict[str, int]:
    try:
        text = path.read_text()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            out[key] = int(value)
    return out


VENDOR = Amd()
