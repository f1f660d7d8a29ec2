"""The exact container configuration for a run: docker-py `containers.create` keyword arguments,
as plain JSON (the engine turns ulimits and device requests into docker types)."""

from __future__ import annotations

from typing import Any

from launcher.caps.gpus import GpuChoice
from launcher.caps.plan import Caps
from launcher.caps.variables import DEPRECATED
from launcher.probe.host import HostFacts

SUPERVISOR = ["python3", "-I", "-S", "/opt/launcher/entrypoint.py"]


def ulimit_list(caps: Caps) -> list[dict[str, Any]]:
    return [{"Name": n, "Soft": u.soft, "Hard": u.hard} for n, u in caps.ulimits.items()]


def gpu_config(choice: GpuChoice, facts: HostFacts) -> dict[str, Any]:
    """Devices, device requests, groups and security options for the chosen GPUs."""
    if choice.vendor == "nvidia":
        req: dict[str, Any] = {"Driver": "nvidia", "Capabilities": [["gpu"]]}
        if choice.all:
            req["Count"] = -1
        else:
            req["DeviceIDs"] = [str(i) for i in choice.ids]
        return {"device_requests": [req]}
    if choice.vendor == "amd":
        nodes = {g.index: g.render_node for g in facts.gpus if g.vendor == "amd"}
        devices = ["/dev/kfd:/dev/kfd:rwm"]
        if choice.all:
            devices.append("/dev/dri:/dev/dri:rwm")
        else:
            for i in choice.ids:
                node = nodes.get(i) or f"/dev/dri/renderD{128 + i}"
                devices.append(f"{node}:{node}:rwm")
        groups = ["video"] + ([str(facts.render_gid)] if facts.render_gid is not None else [])
        return {"devices": devices, "group_add": groups, "security_opt": ["seccomp=unconfined"]}
    return {}


def vendor_env(choice: GpuChoice) -> dict[str, str]:
    if choice.vendor == "nvidia":
        return {"NVIDIA_VISIBLE_DEVICES": "all" if choice.all else
                ",".join(map(str, choice.ids))}
    return {}


def container_spec(
    caps: Caps,
    choice: GpuChoice,
    facts: HostFacts,
    image: str,
    command: list[str],
    mount_supervisor: str | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    """Everything sent to the daemon. `mount_supervisor` is the host's launcher package, bind-
    mounted read-only for images that were not built by launcher."""
    env = caps.environment()
    env.update(vendor_env(choice))
    # The caps are resolved here, for this container and the limits set below, so the
    # supervisor inside takes them as given (its fast path) and only removes stale names.
    env["LAUNCHER_RESOLVED"] = "1"
    remove = set(caps.removed()) | {n for n in DEPRECATED if n not in env}
    env["LAUNCHER_REMOVE"] = ",".join(sorted(remove))  # stale names the image's ENV may hold
    spec: dict[str, Any] = {
        "image": image,
        "command": command,
        "environment": dict(sorted(env.items())),
        "ulimits": ulimit_list(caps),
        "labels": {"launcher.profile": caps.profile, "launcher.framework": caps.framework},
        "init": False,  # the supervisor is PID 1: it forwards signals and reaps
    }
    if name:
        spec["name"] = name
    lim = caps.limits
    if lim["pids"].value:
        spec["pids_limit"] = int(lim["pids"].value)
    if lim["memory"].value:
        spec["mem_limit"] = int(lim["memory"].value)
        spec["memswap_limit"] = int(lim["memory"].value)  # no swap beyond the limit
    if lim["shm"].value:
        spec["shm_size"] = int(lim["shm"].value)
    if lim["cpus"].value:
        spec["nano_cpus"] = int(float(lim["cpus"].value) * 1_000_000_000)
    spec.update(gpu_config(choice, facts))
    if mount_supervisor:
        spec["entrypoint"] = SUPERVISOR
        spec["volumes"] = {
            f"{mount_supervisor}": {"bind": "/opt/launcher/launcher", "mode": "ro"},
            f"{mount_supervisor}/supervise/entrypoint.py": {
                "bind": "/opt/launcher/entrypoint.py", "mode": "ro"},
        }
    return spec
