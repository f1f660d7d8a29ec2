"""What `launcher build` is asked for (its flags, declared once), and the `launcher build`
command line of a request: a render or a run names the build that makes its image."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from launcher.flags import (
    BASE_IMAGE,
    CA_CERT,
    FRAMEWORK,
    HOST_ROOT,
    PROFILE,
    TAG,
    Flag,
    argv_of,
    flag,
)


@dataclass(frozen=True, kw_only=True)
class BuildRequest:
    profile: str = flag(PROFILE, "auto")
    framework: str | None = flag(FRAMEWORK)
    base_image: str | None = flag(BASE_IMAGE)
    tag: str | None = flag(TAG)
    ca_cert: Path | None = flag(CA_CERT)
    host_root: Path | None = flag(HOST_ROOT)
    no_cache: bool = flag(Flag(("--no-cache",), "Rebuild every layer.", kind="bool"), False)
    push: bool = flag(Flag(("--push",), "Push the image to its registry after the build (name "
                           "it with --image REGISTRY/NAME:TAG).", kind="bool"), False)


def build_command(profile: str, framework: str, *, image: str | None = None,
                  base_image: str | None = None, ca_cert: str | None = None,
                  push: bool = False) -> str:
    """The `launcher build` that makes the image a render or a run names, quoted to paste."""
    req = BuildRequest(profile=profile, framework=framework, base_image=base_image, tag=image,
                       ca_cert=None if ca_cert is None else Path(ca_cert), push=push)
    return shlex.join(["launcher", "build", *argv_of(req, always=("profile",))])
