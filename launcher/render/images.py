"""Checks on what reaches a Dockerfile: image references, Debian package names, pip
requirements. (Base images and framework packages belong to each vendor: launcher/vendors/.)"""

from __future__ import annotations

import re

from launcher.errors import LauncherError

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


def pushed(ref: str) -> bool:
    """A reference a cluster's nodes can pull: it names its registry (a host with a dot or a
    port, or localhost), as in registry.example.com/team/job:1 or docker.io/me/job:1."""
    first, sep, _ = ref.partition("/")
    return bool(sep and _IMAGE_REF.match(ref)) and ("." in first or ":" in first
                                                    or first == "localhost")


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


def default_tag(profile: str, framework: str) -> str:
    name = re.sub(r"[^a-z0-9._-]", "-", profile.lower()).strip("-._") or "profile"
    return f"launcher/{name}:{framework}"


def build_command(profile: str, framework: str, *, image: str | None = None,
                  base_image: str | None = None, ca_cert: str | None = None,
                  push: bool = False) -> str:
    """The `launcher build` that makes the image a render or a run names, quoted to paste."""
    import shlex

    words = ["launcher", "build", "--profile", profile, "--framework", framework]
    for flag, value in (("--base-image", base_image), ("--ca-cert", ca_cert),
                        ("--image", image)):
        if value is not None:
            words += [flag, value]
    return shlex.join(words + ["--push"] * push)
