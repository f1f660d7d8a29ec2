"""Checks on what reaches a Dockerfile: image references, Debian package names, pip
requirements. (Base images and framework packages belong to each vendor: launcher/vendors/.)"""

from __future__ import annotations

import re

from launcher.errors import LauncherError
from launcher.profiles.image_keys import (
    IMAGE_REF,
    apt_names_problem,
    image_ref_problem,
    pip_requirements_problem,
)


def check_image_ref(ref: str, what: str) -> str:
    if image_ref_problem(ref):
        raise LauncherError(f"{what}: not a valid image reference (got {ref!r})")
    return ref


def pushed(ref: str) -> bool:
    """A reference a cluster's nodes can pull: it names its registry (a host with a dot or a
    port, or localhost), as in registry.example.com/team/job:1 or docker.io/me/job:1."""
    first, sep, _ = ref.partition("/")
    return bool(sep and IMAGE_REF.match(ref)) and ("." in first or ":" in first
                                                    or first == "localhost")


def check_apt_packages(names: list[str], where: str) -> list[str]:
    """The load checked them already; a profile built in code is checked here."""
    why = apt_names_problem(names)
    if why:
        raise LauncherError(f"{where}: image.apt_packages: {why}")
    return names


def check_pip_requirements(reqs: list[str], where: str) -> list[str]:
    why = pip_requirements_problem(reqs)
    if why:
        raise LauncherError(f"{where}: image.pip_packages: {why}")
    return reqs


def default_tag(profile: str, framework: str) -> str:
    name = re.sub(r"[^a-z0-9._-]", "-", profile.lower()).strip("-._") or "profile"
    return f"launcher/{name}:{framework}"
