"""Run specs -> compose.yaml (Compose v2, no top-level `version:`).

Built as data and dumped by PyYAML, so every value is quoted by the YAML emitter; `$` is doubled
because Compose interpolates it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from launcher.runtime.spec import RunSpec

# Limits (runtime/spec.py) -> compose service keys, after pids_limit and ulimits.
_SERVICE = {"memory": "mem_limit", "memory_swap": "memswap_limit", "shm": "shm_size",
            "cpus": "cpus", "cpuset": "cpuset"}


def _esc(value: str) -> str:
    return value.replace("$", "$$")


def project_name(profile: str) -> str:
    name = re.sub(r"[^a-z0-9_-]", "-", f"launcher-{profile}".lower())
    return name.strip("-_") or "launcher"


def service(spec: RunSpec, env: dict[str, str]) -> dict[str, Any]:
    """One compose service from a run spec. `env`: the explicit variables only (the image's
    entrypoint applies the caps)."""
    svc: dict[str, Any] = {"image": spec.image}
    if spec.command:
        svc["command"] = [_esc(c) for c in spec.command]
    if env:
        svc["environment"] = {k: _esc(v) for k, v in sorted(env.items())}
    if spec.mounts:
        svc["volumes"] = [_esc(f"{m.source}:{m.target}" + (":ro" if m.read_only else ""))
                          for m in spec.mounts]
    if spec.workdir:
        svc["working_dir"] = _esc(spec.workdir)
    if spec.user:
        svc["user"] = _esc(spec.user)
    limits = spec.limits.given()
    if "pids" in limits:
        svc["pids_limit"] = limits["pids"]
    if spec.ulimits:
        svc["ulimits"] = {n: {"soft": u.soft, "hard": u.hard} for n, u in spec.ulimits.items()}
    for key, value in limits.items():
        if key in _SERVICE:
            svc[_SERVICE[key]] = round(value, 3) if key == "cpus" else value
    # Reservations live under deploy (compose-go refuses mem_reservation beside them).
    reservations: dict[str, Any] = {}
    if "memory_reservation" in limits:
        reservations["memory"] = f"{limits['memory_reservation']}b"  # the schema wants a string
    access = spec.gpu_access
    if access.request is not None:
        r = access.request
        dev: dict[str, Any] = {"driver": r.driver, "capabilities": list(r.capabilities)}
        if r.ids is None:
            dev["count"] = "all"
        else:
            dev["device_ids"] = list(r.ids)
        reservations["devices"] = [dev]
    if reservations:
        svc["deploy"] = {"resources": {"reservations": reservations}}
    if access.devices:
        svc["devices"] = [f"{d}:{d}:rwm" for d in access.devices]
    if access.groups:
        svc["group_add"] = list(access.groups)
    if access.security_opt:
        svc["security_opt"] = list(access.security_opt)
    return svc


def render_compose(profile: str, services: dict[str, RunSpec],
                   env: dict[str, dict[str, str]], notes: list[str] | None = None) -> str:
    """One service per spec (one per GPU for multi-GPU profiles), each with its explicit
    variables `env[name]`; `notes` become comments."""
    import yaml

    doc = {"name": project_name(profile),
           "services": {name: service(spec, env.get(name, {}))
                        for name, spec in services.items()}}
    header = (f"# Rendered by launcher for profile {json.dumps(profile)}. The image's "
              f"entrypoint applies\n"
              f"# the thread and allocator caps; this file carries the container limits.\n")
    header += "".join(f"# {line}\n" for note in notes or [] for line in note.splitlines())
    return header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=100)
