"""Profile -> compose.yaml (Compose v2, no top-level `version:`).

Built as data and dumped by PyYAML, so every value is quoted by the YAML emitter; `$` is doubled
because Compose interpolates it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from launcher.caps.gpus import GpuChoice
from launcher.caps.plan import Caps
from launcher.probe.host import HostFacts
from launcher.runtime.spec import gpu_config


def _esc(value: str) -> str:
    return value.replace("$", "$$")


def _ulimits(caps: Caps) -> dict[str, Any]:
    return {n: {"soft": u.soft, "hard": u.hard} for n, u in caps.ulimits.items()}


def project_name(profile: str) -> str:
    name = re.sub(r"[^a-z0-9_-]", "-", f"launcher-{profile}".lower())
    return name.strip("-_") or "launcher"


def service(caps: Caps, image: str, command: list[str] | None, choice: GpuChoice,
            facts: HostFacts, memory: int | None, cpus: float | None,
            env: dict[str, str]) -> dict[str, Any]:
    svc: dict[str, Any] = {"image": image}
    if command:
        svc["command"] = [_esc(c) for c in command]
    if env:
        svc["environment"] = {k: _esc(v) for k, v in sorted(env.items())}
    lim = caps.limits
    if lim["pids"].value:
        svc["pids_limit"] = int(lim["pids"].value)
    if caps.ulimits:
        svc["ulimits"] = _ulimits(caps)
    if memory:
        svc["mem_limit"] = memory
        svc["memswap_limit"] = memory
    if lim["shm"].value:
        svc["shm_size"] = int(lim["shm"].value)
    if cpus:
        svc["cpus"] = round(cpus, 3)
    gpu = gpu_config(choice, facts)
    if choice.vendor == "nvidia":
        req = gpu["device_requests"][0]
        dev: dict[str, Any] = {"driver": "nvidia", "capabilities": ["gpu"]}
        if "Count" in req:
            dev["count"] = "all"
        else:
            dev["device_ids"] = req["DeviceIDs"]
        svc["deploy"] = {"resources": {"reservations": {"devices": [dev]}}}
    elif choice.vendor == "amd":
        svc["devices"] = gpu["devices"]
        svc["group_add"] = gpu["group_add"]
        svc["security_opt"] = gpu["security_opt"]
    return svc


def render_compose(caps: Caps, image: str, choice: GpuChoice, facts: HostFacts,
                   command: list[str] | None = None,
                   env: dict[str, str] | None = None) -> str:
    """One service per GPU (each with its share of memory and CPUs), or one service."""
    import yaml

    env = env or {}
    mem = caps.limits["memory"].value
    cpus = caps.limits["cpus"].value
    services: dict[str, Any] = {}
    if choice.vendor != "none" and len(choice.ids) > 1:
        n = len(choice.ids)
        for i in choice.ids:
            one = GpuChoice(choice.vendor, (i,))
            services[f"gpu{i}"] = service(caps, image, command, one, facts,
                                          int(mem) // n if mem else None,
                                          float(cpus) / n if cpus else None, env)
    else:
        services["main"] = service(caps, image, command, choice, facts,
                                   int(mem) if mem else None, float(cpus) if cpus else None, env)
    doc = {"name": project_name(caps.profile), "services": services}
    header = (f"# Rendered by launcher for profile {json.dumps(caps.profile)}. The image's "
              f"entrypoint applies\n"
              f"# the thread and allocator caps; this file carries the container limits.\n")
    return header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=100)
