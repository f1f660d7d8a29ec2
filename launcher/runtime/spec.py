"""The run spec: launcher's own, engine-neutral description of a workload to start. Each engine
(runtime/engines.py) and each renderer (compose, RunPod, Kubernetes) translates from it."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

from launcher import contract as c
from launcher.caps.resolve import Resolved
from launcher.errors import LauncherError
from launcher.variables import DEPRECATED
from launcher.vendors import get as get_vendor
from launcher.vendors.base import GpuAccess, GpuSelection


@dataclass(frozen=True)
class Mount:
    source: str  # a path on the host
    target: str  # where the workload sees it
    read_only: bool = False

    @classmethod
    def parse(cls, text: str) -> Mount:
        """`--volume SRC:DST[:ro|rw]`, as docker writes it."""
        parts = text.split(":")
        if len(parts) not in (2, 3) or not all(parts[:2]) or parts[2:] not in ([], ["ro"],
                                                                                 ["rw"]):
            raise LauncherError(f"--volume: expected SRC:DST or SRC:DST:ro (got {text!r})")
        return cls(parts[0], parts[1], parts[2:] == ["ro"])


@dataclass(frozen=True)
class Limits:
    pids: int | None = None
    memory: int | None = None  # bytes: the hard limit
    swap: int | None = None  # swap allowed beyond `memory` (0: none)
    memory_reservation: int | None = None  # bytes: the expected peak (a soft limit)
    shm: int | None = None  # bytes of /dev/shm
    cpus: float | None = None  # CPU quota
    cpuset: str | None = None  # e.g. "0-3"

    def given(self) -> dict[str, Any]:
        """The limits that are set, with `memory_swap` = memory + the swap allowed."""
        out: dict[str, Any] = {}
        for key, value in asdict(self).items():
            if key == "swap":
                if self.memory:
                    out["memory_swap"] = self.memory + (value or 0)
            elif value:
                out[key] = value
        return out


@dataclass(frozen=True)
class Rlimit:
    soft: int  # -1: unlimited
    hard: int


@dataclass
class RunSpec:
    command: list[str]
    image: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    remove_env: list[str] = field(default_factory=list)  # stale names the image may hold
    mounts: list[Mount] = field(default_factory=list)
    workdir: str | None = None
    user: str | None = None  # "UID[:GID]" in a container
    limits: Limits = field(default_factory=Limits)
    ulimits: dict[str, Rlimit] = field(default_factory=dict)
    gpus: GpuSelection = field(default_factory=GpuSelection)
    gpu_access: GpuAccess = field(default_factory=GpuAccess)  # devices, groups: containers
    labels: dict[str, str] = field(default_factory=dict)
    name: str | None = None
    interactive: bool = False  # a container's stdin is launcher's (`docker run -i`)
    tty: bool = False  # a container gets a terminal (`docker run -t`)
    imports_launcher: bool = False  # the workload imports launcher (the built-in workloads)
    # who asks that a limit the kernel cannot enforce here refuses the start (--require-limits,
    # the profile's limits.require); None: such a limit is a warning
    required_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        del out["required_by"]  # a policy of the start, said beside the spec (refused_by)
        return out

    def supervisor_env(self) -> dict[str, str]:
        """The environment handed to the supervisor: the caps resolved here (it takes them as
        given), the stale names to remove, which the image's ENV may hold, and the lifeline:
        the engine keeps the supervisor's stdin open while launcher lives."""
        env = dict(self.env)
        env[c.RESOLVED] = "1"
        env[c.REMOVE] = c.encode_names(self.remove_env)
        if not (self.interactive or self.tty):
            env[c.WATCH_STDIN] = "1"
        elif env.get(c.EXIT_FILE):  # stdin is the user's: a FIFO beside the exit file
            env[c.LIFELINE_PATH] = lifeline_path(env[c.EXIT_FILE])
        return dict(sorted(env.items()))


def lifeline_path(exit_file: str) -> str:
    return os.path.join(os.path.dirname(exit_file), "lifeline")


def build_spec(r: Resolved, command: list[str], *, image: str | None = None,
               name: str | None = None, mounts: list[Mount] | None = None,
               workdir: str | None = None, user: str | None = None,
               selection: GpuSelection | None = None, share: int = 1,
               required_by: str | None = None) -> RunSpec:
    """A resolved profile as a run of `command`; with `selection` and `share`, one of `share`
    runs that split the GPUs, the memory and the CPUs between them."""
    caps = r.caps
    env = caps.environment()
    lim = caps.limits
    if selection is not None:  # the vendor's variables for these GPUs, not the profile's all
        vendor = get_vendor(r.selection.vendor)
        for var in vendor.environment(r.selection, r.profile.get("gpu", {})):
            env.pop(var, None)
        env.update(get_vendor(selection.vendor).environment(selection,
                                                            r.profile.get("gpu", {})))
    selection = selection or r.selection
    memory = int(lim["memory"].value) // share if lim["memory"].value else None
    cpus = float(lim["cpus"].value) / share if lim["cpus"].value else None
    return RunSpec(
        command=list(command),
        image=image,
        env=env,
        remove_env=sorted(set(caps.removed()) | {n for n in DEPRECATED if n not in env}),
        mounts=list(mounts or []),
        workdir=workdir,
        user=user,
        limits=Limits(
            pids=int(lim["pids"].value) if lim["pids"].value else None,
            memory=memory,
            swap=0 if memory else None,  # no swap beyond the limit
            shm=int(lim["shm"].value) if lim["shm"].value else None,
            cpus=cpus,
            cpuset=str(lim["cpuset"].value) if lim.get("cpuset") and lim["cpuset"].value
            else None,
        ),
        ulimits={n: Rlimit(u.soft, u.hard) for n, u in caps.ulimits.items()},
        gpus=selection,
        gpu_access=get_vendor(selection.vendor).access(selection, r.facts.host_gpus()),
        labels={"launcher.profile": caps.profile, "launcher.framework": caps.framework},
        name=name,
        required_by=required_by,
    )
