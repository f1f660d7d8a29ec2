"""GPUs of every registered vendor (launcher/vendors/), found under a root path."""

from __future__ import annotations

from pathlib import Path

from launcher.vendors import gpu_vendors
from launcher.vendors.base import Gpu


def read_gpus(root: Path, use_tools: bool = False) -> list[Gpu]:
    return [g for vendor in gpu_vendors() for g in vendor.detect(root, use_tools)]


def read_groups(root: Path, names: set[str]) -> dict[str, int]:
    """Numeric GIDs of the named groups in /etc/group."""
    try:
        text = (root / "etc/group").read_text()
    except FileNotFoundError:
        return {}
    out = {}
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) >= 3 and fields[0] in names and fields[2].isdigit():
            out[fields[0]] = int(fields[2])
    return out
