"""Run specs -> container plans (runtime/container.py) -> compose.yaml (Compose v2, no top-level
`version:`).

Built as data and dumped by PyYAML, so every value is quoted by the YAML emitter; `$` is doubled
because Compose interpolates it.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from launcher.caps.gpus import one_per_process
from launcher.caps.resolve import Resolved
from launcher.render.yamltext import yaml_dumper
from launcher.runtime.container import ContainerPlan, plan
from launcher.runtime.spec import Limits, RunSpec, build_spec
from launcher.vendors.base import GpuSelection

# ContainerPlan limits -> compose service keys, after pids_limit and ulimits; the reservation
# goes under deploy.
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
    return to_service(plan(spec, deployed_env=env))


def to_service(p: ContainerPlan) -> dict[str, Any]:
    """A plan as a compose service (no limit: Compose's default is none). A stack's plan has
    no entrypoint, lifeline, labels or name; they are written where another plan has them.
    `remove` has no key: a stack's containers stay until `docker compose down`."""
    svc: dict[str, Any] = {"image": p.image}
    if p.command:
        svc["command"] = [_esc(c) for c in p.command]
    if p.env:
        svc["environment"] = {k: _esc(v) for k, v in p.env.items()}
    if p.mounts:
        svc["volumes"] = [_esc(f"{m.source}:{m.target}" + (":ro" if m.read_only else ""))
                          for m in p.mounts]
    if p.workdir:
        svc["working_dir"] = _esc(p.workdir)
    if p.user:
        svc["user"] = _esc(p.user)
    limits = p.limits()
    if "pids" in limits:
        svc["pids_limit"] = limits["pids"]
    if p.ulimits:
        svc["ulimits"] = {n: {"soft": u.soft, "hard": u.hard} for n, u in p.ulimits.items()}
    for key, value in limits.items():
        if key in _SERVICE:
            svc[_SERVICE[key]] = round(value, 3) if key == "cpus" else value
    # Reservations live under deploy (compose-go refuses mem_reservation beside them).
    reservations: dict[str, Any] = {}
    if "memory_reservation" in limits:
        reservations["memory"] = f"{limits['memory_reservation']}b"  # the schema wants a string
    if (r := p.device_request) is not None:
        dev: dict[str, Any] = {"driver": r.driver, "capabilities": list(r.capabilities)}
        if r.ids is None:
            dev["count"] = "all"
        else:
            dev["device_ids"] = list(r.ids)
        reservations["devices"] = [dev]
    if reservations:
        svc["deploy"] = {"resources": {"reservations": reservations}}
    if p.devices:
        svc["devices"] = [f"{d}:{d}:rwm" for d in p.devices]
    if p.groups:
        svc["group_add"] = list(p.groups)
    if p.seccomp_unconfined:
        svc["security_opt"] = ["seccomp=unconfined"]
    if p.entrypoint is not None:
        svc["entrypoint"] = [_esc(c) for c in p.entrypoint]
    for key, value in (("stdin_open", p.stdin_open), ("init", p.init)):
        if value:
            svc[key] = True
    if p.labels:
        svc["labels"] = {k: _esc(v) for k, v in p.labels.items()}
    if p.name:
        svc["container_name"] = _esc(p.name)
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
    return header + yaml.dump(doc, Dumper=yaml_dumper(), sort_keys=False, default_flow_style=False,
                              width=100)


HEADROOM = 1.25  # a service's memory limit over its expected peak (workers.memory)


def service_specs(r: Resolved, command: list[str], image: str) -> dict[str, RunSpec]:
    """The services of a deployable stack (compose, later Kubernetes): one per GPU (`gpuN`)
    where the profile runs a process per GPU (rig-6600: 12 processes, 12 GPUs), else one
    (`main`) that sees every selected GPU (docker-5gpu: one process, five GPUs, as report 001
    ran it). Each gets its share of CPUs and memory; where the profile gives `workers.memory`
    (the measured peak of one process), a service's limit is its processes' peak plus 25%
    headroom and that peak is its reservation (a note says when the limits overcommit)."""
    sel = r.selection
    per_gpu = one_per_process(r.caps.processes, sel.count)
    n = sel.count if per_gpu else 1
    procs = max(1, (r.caps.processes // n) if per_gpu else r.caps.processes)
    specs = ({f"gpu{i}": build_spec(r, command, image=image,
                                    selection=GpuSelection(sel.vendor, (i,)), share=n)
              for i in sel.ids} if per_gpu
             else {"main": build_spec(r, command, image=image)})
    peak = r.profile.get("workers.memory")
    cpus = _service_cpus(r, n, procs)
    for spec in specs.values():
        lim = spec.limits
        memory = lim.memory
        if peak:  # the measured peak, with headroom, is the limit; the peak the reservation
            memory = math.ceil(peak * procs * HEADROOM / 2**20) * 2**20
        spec.limits = Limits(lim.pids, memory, lim.swap, peak * procs if peak else None,
                             lim.shm, lim.cpus or cpus, lim.cpuset)
    return specs


def _service_cpus(r: Resolved, n: int, procs: int) -> float | None:
    """CPUs of one of `n` services: the profile's limits.cpus or hardware.cpus shared out,
    else what its thread pools are sized for (an explicit threads.intra_op x processes)."""
    hw = r.profile.get("hardware.cpus")
    if isinstance(hw, int):
        return round(hw / n, 3)
    intra = r.profile.get("threads.intra_op")
    return float(intra * procs) if isinstance(intra, int) else None
