"""The container plan: every decision on how a run spec becomes a container, made once and in
neutral terms (which variables win, the limits, the ulimits, what the GPUs need, launcher's
mounts and entrypoint). Docker (runtime/docker_engine.py), Podman (runtime/podman_engine.py)
and compose (render/compose.py) only translate a plan into their syntax; another engine is one
more translator, not another copy of these decisions."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from launcher.contract import IN_IMAGE, PSUTIL_IN_IMAGE, SUPERVISOR
from launcher.runtime.spec import Mount, Rlimit, RunSpec
from launcher.vendors.base import DeviceRequest

PACKAGE = Path(__file__).resolve().parents[1]  # launcher's package on this host
# Every limit, in the order each translation writes them (Limits.given()'s).
LIMITS = ("pids", "memory", "memory_swap", "memory_reservation", "shm", "cpus", "cpuset")


@dataclass(frozen=True)
class ContainerPlan:
    image: str | None
    command: tuple[str, ...]
    entrypoint: tuple[str, ...] | None = None  # None: the image's own
    stdin_open: bool = False  # the lifeline: stdin open while launcher lives (or -i)
    tty: bool = False  # a terminal (-t)
    env: dict[str, str] = field(default_factory=dict)  # the whole environment, sorted
    mounts: tuple[Mount, ...] = ()  # the caller's, then launcher's own
    workdir: str | None = None
    user: str | None = None
    name: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    init: bool = False  # an init process as PID 1 (the supervisor is, or the image's own)
    remove: bool = True  # removed once it ends
    # Limits, None where none is asked: the container gets no limit, whatever the engine's
    # default. Bytes, CPUs (a quota) and a CPU list.
    pids: int | None = None
    memory: int | None = None
    memory_swap: int | None = None  # memory + swap allowed
    memory_reservation: int | None = None  # a soft limit, the expected peak
    shm: int | None = None
    cpus: float | None = None
    cpuset: str | None = None
    ulimits: dict[str, Rlimit] = field(default_factory=dict)  # -1: unlimited
    # GPUs: device files mapped at the same path (read, write, mknod), supplementary groups
    # (names or GIDs), the syscall filter off, and a request for the vendor's toolkit.
    devices: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    seccomp_unconfined: bool = False
    device_request: DeviceRequest | None = None

    def limits(self) -> dict[str, int | float | str]:
        """The limits set, by their names in LIMITS, in that order."""
        return {k: v for k in LIMITS if (v := getattr(self, k)) is not None}


def plan(spec: RunSpec, *, deployed_env: Mapping[str, str] | None = None,
         engine_ulimits: Mapping[str, Rlimit] | None = None) -> ContainerPlan:
    """The container for `spec`.

    `deployed_env`: a deployed stack's service (compose) rather than a run: the image's own
    entrypoint applies the caps, so launcher is neither mounted nor the entrypoint, and the
    container gets these explicit variables only. `engine_ulimits`: ulimits the engine would
    otherwise set from its own defaults, pinned where the spec leaves them out (Podman: the
    caller's nofile and nproc)."""
    deployed = deployed_env is not None
    mounts = list(spec.mounts)
    supervised = not deployed
    if supervised:  # launcher's package and the supervisor, read-only
        mounts += [Mount(str(PACKAGE), f"{IN_IMAGE}/launcher", True),
                   Mount(f"{PACKAGE}/supervise/entrypoint.py", f"{IN_IMAGE}/entrypoint.py",
                         True)]
        psutil = watch_needs()
        if psutil is not None:  # the watch's psutil (abi3: any CPython 3.6+ of the image)
            mounts.append(Mount(psutil, PSUTIL_IN_IMAGE, True))
    ulimits = dict(spec.ulimits)
    for name, u in (engine_ulimits or {}).items():
        ulimits.setdefault(name, u)
    access = spec.gpu_access
    limits = spec.limits.given()
    return ContainerPlan(
        image=spec.image,
        command=tuple(spec.command),
        entrypoint=tuple(SUPERVISOR) if supervised else None,
        stdin_open=supervised or spec.interactive,
        tty=spec.tty,
        env=dict(sorted(deployed_env.items())) if deployed_env is not None
        else _environment(spec),
        mounts=tuple(mounts),
        workdir=spec.workdir,
        user=spec.user,
        # a stack names its services by their keys; its labels were never rendered (kept so)
        name=None if deployed else spec.name,
        labels={} if deployed else dict(spec.labels),
        init=False,  # the supervisor is PID 1
        remove=not deployed,
        **{k: limits.get(k) for k in LIMITS},
        ulimits=ulimits,
        devices=tuple(access.devices),
        groups=tuple(access.groups),
        seccomp_unconfined=access.unconfined_syscalls,
        device_request=access.request,
    )


def _environment(spec: RunSpec) -> dict[str, str]:
    """The supervisor's variables, launcher importable by a workload that imports it, and a
    HOME for a caller's UID, which has none in the image."""
    env = spec.supervisor_env()
    if spec.imports_launcher:  # before any PYTHONPATH the user gave
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [IN_IMAGE, env.get("PYTHONPATH")]))
    if spec.user and spec.user.split(":")[0] not in ("0", "root") and "HOME" not in env:
        env["HOME"] = "/tmp"  # caches go here
    return dict(sorted(env.items()))


def watch_needs() -> str | None:
    """The folder of this interpreter's psutil (found, not imported), for the watch in a
    container; None where there is none (the supervisor then says what it lacks)."""
    import importlib.util

    spec = importlib.util.find_spec("psutil")
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(spec.submodule_search_locations[0])


def watch_site() -> str | None:
    """Where this interpreter's psutil sits (its site folder), for a native supervisor that
    runs isolated (`-I -S`)."""
    folder = watch_needs()
    return os.path.dirname(folder) if folder else None
