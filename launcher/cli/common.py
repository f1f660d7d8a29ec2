"""What the commands share: a profile resolved against a host, and the default image tag."""

from __future__ import annotations

import re
from pathlib import Path

from launcher.caps.resolve import Resolved, resolve
from launcher.cli.output import parse_env_pairs
from launcher.probe import probe_host
from launcher.profiles import load_profile


def resolve_profile(profile_ref: str, framework: str | None = None,
                    processes: int | None = None, env_pairs: list[str] | None = None,
                    gpus: str | None = None, host_root: Path | None = None,
                    inherit_shell: bool = True, for_this_host: bool = True,
                    clamp: bool = False) -> Resolved:
    """Load `profile_ref`, read the host (or `host_root`) and resolve: the one path, with the
    shell's managed variables as the inherited environment when `inherit_shell`."""
    overrides = parse_env_pairs(env_pairs)
    facts = probe_host(host_root or "/")
    return resolve(load_profile(profile_ref), facts, framework, processes, overrides, gpus,
                   facts.env if inherit_shell else {}, for_this_host, clamp)


def default_tag(profile: str, framework: str) -> str:
    name = re.sub(r"[^a-z0-9._-]", "-", profile.lower()).strip("-._") or "profile"
    return f"launcher/{name}:{framework}"
