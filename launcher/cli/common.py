"""What render, build and run share: a profile resolved for a target, with its GPU choice."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.caps.gpus import GpuChoice, select_gpus, with_gpus
from launcher.caps.plan import Caps, compute_caps
from launcher.cli.output import parse_env_pairs
from launcher.errors import LauncherError
from launcher.probe import HostFacts, probe_host
from launcher.profiles import Profile, load_profile
from launcher.profiles.schema import FRAMEWORKS
from launcher.supervise.apply import recipe_from


@dataclass
class Prepared:
    profile: Profile  # with the GPU choice applied
    facts: HostFacts
    choice: GpuChoice
    framework: str
    caps: Caps
    overrides: dict[str, str]
    recipe: dict[str, Any]


def prepare(profile_ref: str, framework: str | None, processes: int | None,
            env_pairs: list[str] | None, gpus: str | None, host_root: Path | None,
            inherit_shell: bool = False, for_this_host: bool = True) -> Prepared:
    if framework is not None and framework not in FRAMEWORKS:
        raise LauncherError(f"--framework must be one of {', '.join(FRAMEWORKS)} "
                            f"(got {framework!r})")
    facts = probe_host(host_root or "/")
    base = load_profile(profile_ref)
    choice = select_gpus(base, facts, gpus, for_this_host)
    profile = with_gpus(base, choice)
    fw = framework or profile.get("framework", "none")
    overrides = parse_env_pairs(env_pairs)
    caps = compute_caps(profile, facts, fw, processes, overrides,
                        inherited=facts.env if inherit_shell else {})
    return Prepared(profile, facts, choice, fw, caps, overrides,
                    recipe_from(profile, fw, processes, overrides))


def default_tag(profile: str, framework: str) -> str:
    name = re.sub(r"[^a-z0-9._-]", "-", profile.lower()).strip("-._") or "profile"
    return f"launcher/{name}:{framework}"
