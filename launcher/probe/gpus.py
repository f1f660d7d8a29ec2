"""GPUs: NVIDIA (nvidia-smi, else /proc/driver/nvidia) and AMD (kfd topology)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Gpu:
    vendor: str  # nvidia | amd
    index: int
    model: str
    memory: int | None = None  # bytes
    gfx_target: str | None = None  # AMD, e.g. gfx1032
    render_node: str | None = None  # AMD, e.g. /dev/dri/renderD128


def read_gpus(root: Path, use_tools: bool = False) -> list[Gpu]:
    return read_nvidia(root, use_tools) + read_amd(root)


def read_nvidia(root: Path, use_tools: bool = False) -> list[Gpu]:
    import shutil  # only the live host path needs these (kept out of the supervisor's start)

    if use_tools and shutil.which("nvidia-smi"):
        import subprocess

        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=index,name,memory.total",
                 "--format=csv,noheader,nounits"],
                capture_output=True, text=True, timeout=10, check=True,
            ).stdout
            gpus = []
            for line in out.splitlines():
                idx, name, mem = (f.strip() for f in line.split(","))
                gpus.append(Gpu("nvidia", int(idx), name, int(float(mem)) * 1024 * 1024))
            return gpus
        except (OSError, subprocess.SubprocessError, ValueError):
            pass
    base = root / "proc/driver/nvidia/gpus"
    if not base.is_dir():
        return []
    gpus = []
    for i, d in enumerate(sorted(base.iterdir())):
        model = "NVIDIA GPU"
        try:
            for line in (d / "information").read_text().splitlines():
                if line.startswith("Model:"):
                    model = line.split(":", 1)[1].strip()
        except OSError:
            pass
        gpus.append(Gpu("nvidia", i, model))
    return gpus


def gfx_name(version: int) -> str:
    """kfd gfx_target_version 100302 -> 'gfx1032'."""
    major, minor, step = version // 10000, (version // 100) % 100, version % 100
    return f"gfx{major}{minor:x}{step:x}"


def read_amd(root: Path) -> list[Gpu]:
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
