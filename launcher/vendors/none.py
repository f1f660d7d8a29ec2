"""No GPU: the CPU images and nothing to map."""

from __future__ import annotations

from launcher.vendors.base import Vendor


class NoGpu(Vendor):
    name = "none"
    label = "CPU"
    has_gpus = False
    template = "Dockerfile.cpu"
    base_image = "python:3.11-slim-bookworm"


VENDOR = NoGpu()
