"""Which base image and framework packages a (vendor, framework) pair gets."""

from __future__ import annotations

import re

from launcher.errors import LauncherError

CUDA_BASE = "nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04"
CPU_BASE = "python:3.11-slim-bookworm"
ROCM_BASE = "rocm/dev-ubuntu-22.04:6.2"

# (vendor, framework) -> (base image, requirements for the framework layer)
IMAGES: dict[tuple[str, str], tuple[str, list[str]]] = {
    ("nvidia", "torch"): (CUDA_BASE, ["torch"]),
    ("nvidia", "tf"): (CUDA_BASE, ["tensorflow[and-cuda]"]),
    ("nvidia", "jax"): (CUDA_BASE, ["jax[cuda12]"]),
    ("nvidia", "none"): (CUDA_BASE, ["numpy"]),
    ("amd", "torch"): (ROCM_BASE, ["--index-url https://download.pytorch.org/whl/rocm6.2",
                                   "torch"]),
    ("amd", "tf"): (ROCM_BASE, ["tensorflow-rocm"]),
    ("amd", "jax"): (ROCM_BASE, ["jax[rocm]"]),
    ("amd", "none"): (ROCM_BASE, ["numpy"]),
    ("none", "torch"): (CPU_BASE, ["--index-url https://download.pytorch.org/whl/cpu", "torch"]),
    ("none", "tf"): (CPU_BASE, ["tensorflow-cpu"]),
    ("none", "jax"): (CPU_BASE, ["jax"]),
    ("none", "none"): (CPU_BASE, []),
}

TEMPLATES = {"nvidia": "Dockerfile.cuda.j2", "amd": "Dockerfile.rocm.j2",
             "none": "Dockerfile.cpu.j2"}

# docker's reference grammar, simplified: [registry[:port]/]path[:tag][@digest]
_IMAGE_REF = re.compile(
    r"^(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:[._-]{1,2}[a-z0-9]+)*"
    r"(?:/[a-z0-9]+(?:[._-]{1,2}[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@sha256:[a-f0-9]{64})?$"
)
_APT_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]+(?:=[A-Za-z0-9.+:~-]+)?$")


def check_image_ref(ref: str, what: str) -> str:
    if not _IMAGE_REF.match(ref):
        raise LauncherError(f"{what}: not a valid image reference (got {ref!r})")
    return ref


def check_apt_packages(names: list[str], where: str) -> list[str]:
    for n in names:
        if not _APT_NAME.match(n):
            raise LauncherError(f"{where}: image.apt_packages: not a Debian package name "
                                f"(got {n!r})")
    return names


def check_pip_requirements(reqs: list[str], where: str) -> list[str]:
    for r in reqs:
        if "\n" in r or "\r" in r or r.lstrip().startswith("-"):
            raise LauncherError(f"{where}: image.pip_packages: one requirement per item, no pip "
                                f"options (got {r!r})")
    return reqs
