"""The container plan (runtime/container.py): its decisions for a few specs, and Docker's,
Podman's and compose's translations of one plan, read back in neutral terms, agreeing on every
limit, ulimit and GPU access (none may drop what the plan has)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from launcher.contract import IN_IMAGE, REMOVE, RESOLVED, SUPERVISOR, WATCH_STDIN
from launcher.render.compose import to_service
from launcher.runtime.container import LIMITS, PACKAGE, ContainerPlan, plan
from launcher.runtime.docker_engine import to_request
from launcher.runtime.podman_engine import to_argv
from launcher.runtime.spec import Limits, Mount, Rlimit, RunSpec
from launcher.vendors import get as get_vendor
from launcher.vendors.base import Gpu, GpuSelection, HostGpus

AMD = get_vendor("amd").access(GpuSelection("amd", (1,)), HostGpus(
    (Gpu("amd", 1, "MI210", render_node="/dev/dri/renderD129"),), {"render": 109}))
NVIDIA_ALL = get_vendor("nvidia").access(GpuSelection("nvidia", (0, 1), True), HostGpus())
FULL = Limits(pids=50, memory=64 << 20, swap=1 << 20, memory_reservation=32 << 20,
              shm=1 << 30, cpus=1.5, cpuset="0-1")
ULIMITS = {"stack": Rlimit(8 << 20, -1), "memlock": Rlimit(-1, -1)}


def _spec(**kw: Any) -> RunSpec:
    return RunSpec(command=["python3", "train.py"], image="img:1", **kw)


def test_amd_access_is_devices_groups_and_no_syscall_filter():
    p = plan(_spec(gpu_access=AMD))
    assert p.devices == ("/dev/kfd", "/dev/dri/renderD129")
    assert p.groups == ("video", "109")
    assert p.seccomp_unconfined and p.device_request is None


def test_nvidia_access_is_a_device_request_for_all():
    p = plan(_spec(gpu_access=NVIDIA_ALL))
    assert p.device_request is not None and p.device_request.ids is None
    assert (p.devices, p.groups, p.seccomp_unconfined) == ((), (), False)


def test_ulimits_unlimited_kept_and_the_engines_only_where_the_spec_is_silent():
    engine = {"stack": Rlimit(1, 1), "nofile": Rlimit(1024, 4096)}
    p = plan(_spec(ulimits=ULIMITS), engine_ulimits=engine)
    assert p.ulimits == {**ULIMITS, "nofile": Rlimit(1024, 4096)}
    assert p.ulimits["memlock"] == Rlimit(-1, -1)  # -1: unlimited, as every engine writes it


def test_limits_pids_memory_cpus():
    p = plan(_spec(limits=FULL))
    assert (p.pids, p.memory, p.memory_swap, p.cpus) == (50, 64 << 20, (64 << 20) + (1 << 20),
                                                         1.5)
    assert list(p.limits()) == list(LIMITS)
    none = plan(_spec())
    assert none.limits() == {} and none.pids is None  # no limit, whatever the engine's default


def test_env_precedence_for_a_supervised_run():
    p = plan(_spec(env={"PYTHONPATH": "/mine", "B": "1", "A": "2"}, user="1000:1000",
                   imports_launcher=True, remove_env=["OLD"]))
    assert list(p.env) == sorted(p.env)
    assert p.env["PYTHONPATH"] == f"{IN_IMAGE}:/mine"  # launcher's first, then the user's
    assert p.env["HOME"] == "/tmp"  # the caller's UID has no home in the image
    assert (p.env[RESOLVED], p.env[WATCH_STDIN], p.env[REMOVE]) == ("1", "1", "OLD")
    assert plan(_spec(env={"HOME": "/h"}, user="1000")).env["HOME"] == "/h"  # the user's wins
    assert "HOME" not in plan(_spec(user="0:0")).env and "HOME" not in plan(_spec()).env
    assert p.entrypoint == tuple(SUPERVISOR) and p.stdin_open and not p.init
    import psutil

    # launcher, its supervisor, and the watch's psutil (this interpreter's: abi3)
    assert p.mounts[-3:] == (Mount(str(PACKAGE), f"{IN_IMAGE}/launcher", True),
                             Mount(f"{PACKAGE}/supervise/entrypoint.py",
                                   f"{IN_IMAGE}/entrypoint.py", True),
                             Mount(str(Path(psutil.__file__).parent),
                                   f"{IN_IMAGE}/psutil", True))


def test_a_deployed_service_gets_its_explicit_env_only():
    spec = _spec(env={"CAPS": "x"}, user="1000", labels={"a": "1"}, name="n",
                 mounts=[Mount("/d", "/in")])
    p = plan(spec, deployed_env={"B": "2", "A": "1"})
    assert p.env == {"A": "1", "B": "2"}  # the image's entrypoint applies the caps
    assert (p.entrypoint, p.stdin_open, p.mounts) == (None, False, (Mount("/d", "/in"),))
    assert (p.labels, p.name, p.remove) == ({}, None, False)


# --- the translations of one plan, read back in neutral terms ----------------------------

DOCKER = {"PidsLimit": "pids", "Memory": "memory", "MemorySwap": "memory_swap",
          "MemoryReservation": "memory_reservation", "ShmSize": "shm", "NanoCpus": "cpus",
          "CpusetCpus": "cpuset"}
PODMAN = {"--pids-limit": "pids", "--memory": "memory", "--memory-swap": "memory_swap",
          "--memory-reservation": "memory_reservation", "--shm-size": "shm", "--cpus": "cpus",
          "--cpuset-cpus": "cpuset"}
COMPOSE = {"pids_limit": "pids", "mem_limit": "memory", "memswap_limit": "memory_swap",
           "shm_size": "shm", "cpus": "cpus", "cpuset": "cpuset"}


def _value(key: str, text: Any) -> Any:
    return str(text) if key == "cpuset" else float(text) if key == "cpus" else int(text)


def _from_docker(p: ContainerPlan) -> dict[str, Any]:
    host = to_request(p)["body"]["HostConfig"]
    limits = {n: host[k] / 1e9 if n == "cpus" else host[k] for k, n in DOCKER.items()
              if k in host}
    return {"limits": limits,
            "ulimits": {u["Name"]: (u["Soft"], u["Hard"]) for u in host.get("Ulimits", [])},
            "devices": [d["PathOnHost"] for d in host.get("Devices", [])],
            "groups": host.get("GroupAdd", []),
            "seccomp": host.get("SecurityOpt", [])}


def _from_podman(p: ContainerPlan) -> dict[str, Any]:
    argv = to_argv(p, as_rootless=False)
    pairs = [(a, argv[i + 1]) for i, a in enumerate(argv[:-1])]
    limits = {PODMAN[a]: _value(PODMAN[a], v) for a, v in pairs if a in PODMAN}
    if limits.get("pids") == -1:  # Podman's "no limit" (its default is 2048)
        del limits["pids"]
    ulimits = {}
    for a, v in pairs:
        if a == "--ulimit":
            name, soft_hard = v.split("=")
            soft, hard = soft_hard.split(":")
            ulimits[name] = (int(soft), int(hard))
    return {"limits": limits, "ulimits": ulimits,
            "devices": [v.split(":")[0] for a, v in pairs if a == "--device" and ":" in v],
            "groups": [v for a, v in pairs if a == "--group-add"],
            "seccomp": [v for a, v in pairs if a == "--security-opt"]}


def _from_compose(p: ContainerPlan) -> dict[str, Any]:
    svc = to_service(p)
    limits = {n: _value(n, svc[k]) for k, n in COMPOSE.items() if k in svc}
    reserved = svc.get("deploy", {}).get("resources", {}).get("reservations", {})
    if "memory" in reserved:
        limits["memory_reservation"] = int(reserved["memory"].removesuffix("b"))
    return {"limits": limits,
            "ulimits": {n: (u["soft"], u["hard"]) for n, u in svc.get("ulimits", {}).items()},
            "devices": [d.split(":")[0] for d in svc.get("devices", [])],
            "groups": svc.get("group_add", []),
            "seccomp": svc.get("security_opt", [])}


@pytest.mark.parametrize("limits", [FULL, Limits()], ids=["every-limit", "none"])
def test_docker_podman_and_compose_agree_on_every_limit(limits):
    p = plan(_spec(limits=limits, ulimits=ULIMITS, gpu_access=AMD))
    want = {"limits": p.limits(),
            "ulimits": {n: (u.soft, u.hard) for n, u in p.ulimits.items()},
            "devices": list(p.devices), "groups": list(p.groups),
            "seccomp": ["seccomp=unconfined"]}
    assert set(want["limits"]) == (set(LIMITS) if limits == FULL else set())
    for engine, read in (("docker", _from_docker), ("podman", _from_podman),
                         ("compose", _from_compose)):
        assert (engine, read(p)) == (engine, want)
