"""The Podman engine: its arguments from the run spec (GPUs through CDI, rootless, every
ulimit), then `launcher run --runtime podman` against the real Podman: a run, the memory
diagnosis, kill -9 of launcher (its lifeline and labels), leftovers, and one clear line for each
failure; what every engine owes a run (exit status, the pids limit, Ctrl-C, kill -9, pipes, file
owners) is tests/test_engine_behaviour.py's, for Podman too.
Podman's image store gets the base image from Docker's (`podman pull docker-daemon:IMAGE`, as
scripts/test.sh does); the real tests skip where Podman is absent, and fail in CI."""

from __future__ import annotations

import functools
import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from launcher.cli.main import app
from launcher.errors import EngineError
from launcher.runtime import podman_engine
from launcher.runtime.podman_engine import PodmanEngine, create_argv, enforcement_of
from launcher.runtime.spec import Limits, Mount, Rlimit, RunSpec
from launcher.vendors import get as get_vendor
from launcher.vendors.base import Gpu, GpuSelection, HostGpus
from tests.conftest import ROOT, need
from tests.docker_helpers import (
    BASE,
    FROM_OUTSIDE,
    HOG,
    SUPERVISOR_KILLED,
    in_process,
    kill_mid_run_and_rerun,
    launcher,
    memory_kill_said,
    podman_missing,
    profile,
    run_dir_of,
    supervisor_sentence,
)
from tests.polling import wait_until

PODMAN = ["--runtime", "podman", "--image", BASE]


def _pairs(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag]


def _spec(**kw) -> RunSpec:  # type: ignore[no-untyped-def]
    return RunSpec(command=["python3", "-c", "print(1)"], image="img:1", **kw)


def test_create_argv_carries_the_whole_spec():
    spec = _spec(limits=Limits(pids=50, memory=64 << 20, swap=0, shm=1 << 30, cpus=1.5,
                               cpuset="0-1"),
                 ulimits={"stack": Rlimit(8 << 20, -1), "nofile": Rlimit(4096, 4096)},
                 mounts=[Mount("/data", "/in", read_only=True)], env={"X": "a b;$(no)"},
                 labels={"launcher.run": "r1", "launcher.owner": "h:1"}, user="1000:1000",
                 workdir="/w", name="n1")
    argv = create_argv(spec, as_rootless=False)
    assert argv[:3] == ["create", "--rm", "--pull=never"]
    assert argv[-4:] == ["img:1", "python3", "-c", "print(1)"]
    assert {f: _pairs(argv, f) for f in ("--pids-limit", "--memory", "--memory-swap",
                                         "--shm-size", "--cpus", "--cpuset-cpus")} == {
        "--pids-limit": ["50"], "--memory": [str(64 << 20)], "--memory-swap": [str(64 << 20)],
        "--shm-size": [str(1 << 30)], "--cpus": ["1.5"], "--cpuset-cpus": ["0-1"]}
    ulimits = dict(u.split("=", 1) for u in _pairs(argv, "--ulimit"))
    assert ulimits["stack"] == f"{8 << 20}:-1" and ulimits["nofile"] == "4096:4096"
    soft, hard = map(int, ulimits["nproc"].split(":"))  # always passed, within Podman's own
    assert 0 < soft <= hard <= 32768
    assert "X=a b;$(no)" in _pairs(argv, "--env")  # one argument: no shell sees it
    assert {"LAUNCHER_WATCH_STDIN=1", "HOME=/tmp"} <= set(_pairs(argv, "--env"))
    assert "--interactive" in argv  # the lifeline
    assert json.loads(_pairs(argv, "--entrypoint")[0])[-1] == "/opt/launcher/entrypoint.py"
    assert _pairs(argv, "--label") == ["launcher.run=r1", "launcher.owner=h:1"]
    assert "/data:/in:ro" in _pairs(argv, "--volume")
    assert (_pairs(argv, "--user"), _pairs(argv, "--workdir"), _pairs(argv, "--name")) == (
        ["1000:1000"], ["/w"], ["n1"])
    assert "--userns=keep-id" not in argv


def test_no_pids_limit_asked_is_none_not_podmans_2048():
    argv = create_argv(_spec(), as_rootless=False)
    assert _pairs(argv, "--pids-limit") == ["-1"]
    assert {u.split("=")[0] for u in _pairs(argv, "--ulimit")} == {"nofile", "nproc"}


def test_rootless_keeps_the_callers_ids_and_groups():
    amd = get_vendor("amd").access(GpuSelection("amd", (0,)), HostGpus(
        (Gpu("amd", 0, "RX 6600", render_node="/dev/dri/renderD128"),), {"render": 109}))
    argv = create_argv(_spec(user="1000:1000", gpu_access=amd), as_rootless=True)
    assert "--userns=keep-id" in argv and _pairs(argv, "--user") == ["1000:1000"]
    assert _pairs(argv, "--group-add") == ["keep-groups"]  # host GIDs are not mapped


@pytest.mark.parametrize(("ids", "all_", "devices"), [
    ((0, 1), True, ["nvidia.com/gpu=all"]),
    ((1, 3), False, ["nvidia.com/gpu=1", "nvidia.com/gpu=3"])])
def test_nvidia_gpus_through_cdi(ids, all_, devices, monkeypatch):
    monkeypatch.setattr(podman_engine, "cdi_spec", lambda kind: True)  # nvidia-ctk wrote one
    access = get_vendor("nvidia").access(GpuSelection("nvidia", ids, all_), HostGpus())
    argv = create_argv(_spec(gpu_access=access), as_rootless=False)
    assert _pairs(argv, "--device") == devices
    assert "--gpus" not in argv


@pytest.mark.parametrize(("ids", "all_", "nodes"), [
    ((0, 1), True, ["nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1", "nvidia10"]),
    ((1,), False, ["nvidiactl", "nvidia-uvm", "nvidia1"])])
def test_nvidia_gpus_without_a_cdi_spec_are_their_device_nodes(tmp_path, monkeypatch, ids, all_,
                                                               nodes):
    dev, cdi = tmp_path / "dev", tmp_path / "cdi"
    dev.mkdir(), cdi.mkdir()
    for n in ("nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1", "nvidia10", "nvidia-caps"):
        (dev / n).touch()
    monkeypatch.setattr(podman_engine, "_HOST_ROOT", tmp_path)
    monkeypatch.setattr(podman_engine, "_CDI_DIRS", (str(cdi),))
    access = get_vendor("nvidia").access(GpuSelection("nvidia", ids, all_), HostGpus())
    argv = create_argv(_spec(gpu_access=access), as_rootless=False)
    assert _pairs(argv, "--device") == [f"{dev}/{n}:{dev}/{n}:rwm" for n in nodes]
    (cdi / "nvidia.yaml").write_text("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n")
    argv = create_argv(_spec(gpu_access=access), as_rootless=False)  # a spec: CDI again
    assert all(d.startswith("nvidia.com/gpu=") for d in _pairs(argv, "--device"))


def test_a_gpu_index_is_mapped_to_its_device_minor(tmp_path, monkeypatch):
    """GPU 1 in PCI order whose driver gave it minor 10: /dev/nvidia10, not /dev/nvidia1."""
    dev, gpus = tmp_path / "dev", tmp_path / "proc/driver/nvidia/gpus"
    dev.mkdir()
    for n in ("nvidiactl", "nvidia0", "nvidia1", "nvidia10"):
        (dev / n).touch()
    for bus, minor in (("0000:17:00.0", 0), ("0000:65:00.0", 10), ("0000:ca:00.0", 1)):
        (gpus / bus).mkdir(parents=True)
        (gpus / bus / "information").write_text(f"Model: H100\nDevice Minor: {minor}\n")
    monkeypatch.setattr(podman_engine, "_HOST_ROOT", tmp_path)
    monkeypatch.setattr(podman_engine, "_CDI_DIRS", (str(tmp_path / "no-cdi"),))
    access = get_vendor("nvidia").access(GpuSelection("nvidia", (1,), False), HostGpus())
    argv = create_argv(_spec(gpu_access=access), as_rootless=False)
    assert _pairs(argv, "--device") == [f"{dev}/{n}:{dev}/{n}:rwm" for n in ("nvidiactl",
                                                                               "nvidia10")]


def test_root_on_cgroup_v2_keeps_the_container_under_the_callers_cgroup(tmp_path, monkeypatch):
    """Podman's cgroupfs default parent (/libpod_parent) is beside the caller's cgroup; the
    container's goes under it, in a child made after launcher's leaf move."""
    from launcher.cgroups.placement import Decision, Placement

    own = tmp_path / "job" / "cmd"
    own.mkdir(parents=True)
    (own / "cgroup.procs").write_text(f"{os.getpid()}\n")
    (tmp_path / "cgroup.controllers").write_text("memory pids\n")
    monkeypatch.setattr(podman_engine, "_CGROUP2", str(tmp_path))
    real_read = podman_engine._read
    monkeypatch.setattr(podman_engine, "_read", lambda path: "0::/job/cmd\n" if str(path)
                        == "/proc/self/cgroup" else real_read(path))
    monkeypatch.setattr(podman_engine, "rootless", lambda: False)
    leaf = Placement("v2", own, ("pids",), ((own, ("pids",)),), own / "launcher-leaf",
                     (os.getpid(),), mode="leaf", caller=own)
    monkeypatch.setattr(podman_engine, "place", lambda cs: Decision((leaf,), {}))
    undone = []
    monkeypatch.setattr(podman_engine, "undo_leaf", lambda *a: undone.append(a))
    spec = _spec(limits=Limits(pids=50))
    parent, put_back = podman_engine.cgroup_parent(spec)
    assert parent == f"/job/cmd/launcher-podman-{os.getpid()}"
    assert (own / "launcher-leaf").is_dir() and (own / "cgroup.subtree_control").read_text() \
        == "+pids"
    assert _pairs(create_argv(spec, False, parent), "--cgroup-parent") == [parent]
    put_back()
    assert not (own / f"launcher-podman-{os.getpid()}").exists() and undone
    beside = Placement("v2", tmp_path / "job", ("pids",), mode="beside", caller=own)
    monkeypatch.setattr(podman_engine, "place", lambda cs: Decision((beside,), {}))
    parent, put_back = podman_engine.cgroup_parent(spec)  # never beside: under its own
    assert parent == f"/job/cmd/launcher-podman-{os.getpid()}" and (tmp_path / parent[1:]).is_dir()
    (tmp_path / parent[1:] / "cgroup.controllers").write_text("memory\n")
    with pytest.raises(EngineError, match=r"cannot enforce pids \(pids\) with Podman here"):
        podman_engine._check_controllers(spec, parent)  # refused, not claimed
    (tmp_path / parent[1:] / "cgroup.controllers").unlink()
    put_back()
    assert not (tmp_path / parent[1:]).exists()
    (own / "cgroup.procs").write_text(f"{os.getpid()}\n1\n")  # another process beside it
    (own / "cgroup.controllers").write_text("memory\n")  # crun would enable it there: EBUSY
    with pytest.raises(EngineError, match="cannot go under /job/cmd, which holds other "
                                          "processes \\(PID 1\\)"):
        podman_engine.cgroup_parent(spec)


def test_amd_gpus_as_device_nodes_groups_and_seccomp():
    access = get_vendor("amd").access(GpuSelection("amd", (1,)), HostGpus(
        (Gpu("amd", 1, "MI210", render_node="/dev/dri/renderD129"),), {"render": 109}))
    argv = create_argv(_spec(gpu_access=access), as_rootless=False)
    assert _pairs(argv, "--device") == ["/dev/kfd:/dev/kfd:rwm",
                                        "/dev/dri/renderD129:/dev/dri/renderD129:rwm"]
    assert _pairs(argv, "--group-add") == ["video", "109"]
    assert _pairs(argv, "--security-opt") == ["seccomp=unconfined"]


def test_rootless_on_cgroup_v1_says_the_limits_are_advisory(monkeypatch):
    spec = _spec(limits=Limits(pids=50, memory=64 << 20, shm=1 << 20))
    assert set(enforcement_of(spec, as_rootless=False).enforced) == {"pids", "memory", "shm"}
    monkeypatch.setattr(podman_engine, "Path", lambda _p: Path("/nonexistent"))  # cgroup v1
    e = enforcement_of(spec, as_rootless=True)
    assert set(e.enforced) == {"shm"} and set(e.advisory) == {"pids", "memory"}
    assert e.advisory["pids"].startswith("rootless Podman sets no cgroup limits on cgroup v1")


def _with_host_info(monkeypatch, host: dict | None) -> None:
    """`podman info`'s answer (None: Podman does not answer), asked afresh."""
    def answer(*a, **k):  # type: ignore[no-untyped-def]
        if host is None:
            raise podman_engine.EngineError("podman info failed")
        return subprocess.CompletedProcess(a, 0, json.dumps({"host": host}), "")

    monkeypatch.setattr(podman_engine, "podman", answer)
    podman_engine._host_info.cache_clear()
    monkeypatch.setattr(podman_engine, "_host_info", functools.cache(
        podman_engine._host_info.__wrapped__))


def test_rootless_on_cgroup_v2_names_the_controllers_not_delegated(monkeypatch):
    spec = _spec(limits=Limits(pids=50, memory=64 << 20, cpus=1.0, cpuset="0"))
    monkeypatch.setattr(podman_engine, "Path", lambda _p: Path("/"))  # cgroup v2
    _with_host_info(monkeypatch, {"cgroupManager": "systemd",
                                  "cgroupControllers": ["cpu", "memory", "pids"]})
    e = enforcement_of(spec, as_rootless=True)
    assert set(e.enforced) == {"pids", "memory", "cpus"} and list(e.advisory) == ["cpuset"]
    assert e.advisory["cpuset"].startswith(
        "no cpuset controller delegated to this user, who has cpu memory pids; ")
    _with_host_info(monkeypatch, {"cgroupManager": "cgroupfs",  # no systemd user session
                                  "cgroupControllers": ["cpu", "memory", "pids"]})
    assert set(enforcement_of(spec, as_rootless=True).advisory) == {"pids", "memory", "cpus",
                                                                     "cpuset"}
    _with_host_info(monkeypatch, None)  # Podman does not answer: unknown, not "none"
    unknown = enforcement_of(spec, as_rootless=True).advisory
    assert unknown["pids"].startswith("`podman info` did not answer")


def test_root_on_a_systemd_host_leaves_the_cgroup_parent_to_podman(monkeypatch, tmp_path):
    """Podman's systemd cgroup manager takes only a slice as --cgroup-parent; with cgroupfs
    the parent is a child of the caller's cgroup (here a tree with no controller to place)."""
    (tmp_path / "user.slice").mkdir()
    (tmp_path / "cgroup.controllers").write_text("")
    monkeypatch.setattr(podman_engine, "rootless", lambda: False)
    monkeypatch.setattr(podman_engine, "_CGROUP2", str(tmp_path))
    real = podman_engine._read
    monkeypatch.setattr(podman_engine, "_read", lambda p: "0::/user.slice\n" if str(p) ==
                        "/proc/self/cgroup" else real(p))
    monkeypatch.setattr(podman_engine, "place", lambda wanted: 1 / 0)  # no placement here
    _with_host_info(monkeypatch, {"cgroupManager": "systemd", "cgroupControllers": ["pids"]})
    assert podman_engine.cgroup_parent(_spec(limits=Limits(pids=40)))[0] is None
    _with_host_info(monkeypatch, {"cgroupManager": "cgroupfs", "cgroupControllers": ["pids"]})
    parent, put_back = podman_engine.cgroup_parent(_spec(limits=Limits(pids=40)))
    assert parent == f"/user.slice/launcher-podman-{os.getpid()}"
    put_back()
    assert not (tmp_path / "user.slice" / f"launcher-podman-{os.getpid()}").exists()


def test_the_dry_run_and_limits_require_use_what_rootless_podman_keeps(monkeypatch):
    """The preview (the dry run's advisory lines, limits.require's refusal) is the run's."""
    monkeypatch.setattr(podman_engine, "Path", lambda _p: Path("/nonexistent"))  # cgroup v1
    spec = _spec(limits=Limits(pids=40))
    monkeypatch.setattr(podman_engine, "rootless", lambda: True)
    assert PodmanEngine().preview(spec).advisory == enforcement_of(spec, True).advisory
    assert list(PodmanEngine().preview(spec).advisory) == ["pids"]
    monkeypatch.setattr(podman_engine, "rootless", lambda: False)
    assert PodmanEngine().preview(spec).advisory == {}


def test_dry_run_prints_the_podman_arguments():
    result = CliRunner().invoke(app, ["run", *PODMAN, "--dry-run", "--json", "--", "true"])
    assert result.exit_code == 0, result.output
    request = json.loads(result.stdout)["request"]
    assert request["create"][:2] == ["podman", "create"] and request["create"][-1] == "true"
    assert request["start"][:3] == ["podman", "start", "--attach"]


def test_missing_podman_is_one_clear_line(tmp_path):
    proc = launcher("run", *PODMAN, "--", "true", env={"PATH": str(tmp_path)})
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1].startswith("error: podman is not installed"), proc.stderr
    assert "Traceback" not in proc.stderr


# --- the real Podman ---------------------------------------------------------------------


def _podman(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def real():
    """Podman that runs containers, with the base image copied from Docker's store; else skip
    (fail in CI, where scripts/test.sh installs it)."""
    need("Podman and the base image", podman_missing(BASE))


def _gone(name: str) -> bool:
    return _podman("container", "exists", name).returncode == 1


def _until(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    wait_until(condition, timeout, what=what)


def test_a_run_lasts_as_long_as_its_workload(real):
    proc = launcher("run", *PODMAN, "--", "python3", "-c",
                    "import time; time.sleep(0.5); print('done')")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "done\n"
    assert "podman run, enforced by the kernel" in proc.stderr
    summary = json.loads((run_dir_of(proc.stderr) / "summary.json").read_text())
    assert summary["runtime"] == "podman" and summary["exit_status"] == 0


def test_telemetry_samples_the_container_against_its_limits(real, tmp_path):
    prof = profile(tmp_path, "tele", "extends: base\nlimits: {pids: 64, memory: 128MiB}\n")
    code = ("import threading, time\n[threading.Thread(target=time.sleep, args=(2,)).start() "
            "for _ in range(8)]\ntime.sleep(2)\n")
    proc = launcher("run", "-p", prof, *PODMAN, "--interval", "0.5", "--", "python3", "-c",
                    code)
    assert proc.returncode == 0, proc.stderr
    run_dir = run_dir_of(proc.stderr)
    rows = [json.loads(x) for x in (run_dir / "telemetry.jsonl").read_text().splitlines()]
    assert rows[0]["pids_max"] == 64 and rows[0]["memory_limit_bytes"] == 128 << 20
    assert max(r["threads"] for r in rows) >= 9  # the supervisor, python and its 8 threads
    assert max(r["pids_current"] or 0 for r in rows) >= 9
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["runtime"] == "podman" and summary["exit_status"] == 0
    assert "podman run, enforced by the kernel: pids 64" in proc.stderr


def test_memory_hog_is_explained_from_the_oom_counter(real, tmp_path):
    prof = profile(tmp_path, "hog", "extends: base\nlimits: {memory: 64MiB}\n")
    proc = launcher("run", "-p", prof, *PODMAN, "--", "python3", "-c", HOG, cwd=tmp_path)
    assert proc.returncode == 137, proc.stderr
    memory_kill_said(proc.stderr, "64MiB")
    # Debian's conmon marks an OOM with a file `oom` in its working directory (conmon#504):
    # the container's own folder, never the caller's
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hog.yaml"]


def test_workload_runs_as_the_given_user_in_the_mounted_folder(real, tmp_path):
    tmp_path.chmod(0o777)
    proc = launcher("run", *PODMAN, "--user", "4321:4322", "-w", str(tmp_path), "--",
                    "touch", "made-here", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    made = (tmp_path / "made-here").stat()
    assert (made.st_uid, made.st_gid) == (4321, 4322)


def _start(name: str, *more: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "launcher", "run", *more, *PODMAN, "--name", name, "--", "sleep",
         "600"],
        env={"PYTHONPATH": str(ROOT), "PATH": os.environ["PATH"],
             "LAUNCHER_RUNS_DIR": os.environ["LAUNCHER_RUNS_DIR"]},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _running(name: str, proc: subprocess.Popen[bytes]) -> Callable[[], bool]:
    def check() -> bool:
        assert proc.poll() is None, proc.communicate()
        state = _podman("container", "inspect", "--format", "{{.State.Status}}", name)
        return state.stdout.strip() == "running"
    return check


def _supervisor_ready(name: str) -> Callable[[], bool]:
    """The supervisor has started the workload (its handlers are in place by then)."""
    def check() -> bool:
        top = _podman("top", name, "args").stdout
        return "sleep 600" in top and "entrypoint.py" in top
    return check


def test_a_supervisor_killed_from_outside_is_said_by_launcher(real, tmp_path):
    """`podman kill --signal KILL`: the supervisor (the container's PID 1) dies before it
    writes how the run ended; launcher says so, with the memory limit it ran under."""
    name = f"launcher-test-{uuid.uuid4().hex[:8]}"
    proc = _start(name, "-p", profile(tmp_path, "lim", "extends: base\n"
                                                        "limits: {memory: 256MiB}\n"))
    try:
        _until(_running(name, proc), "the container never started")
        _until(_supervisor_ready(name), "the workload never started")
        assert _podman("kill", "--signal", "KILL", name).returncode == 0
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 137, err
    last = supervisor_sentence(err.decode())
    assert last.startswith(SUPERVISOR_KILLED + "under the memory limit of 256MiB the "
                           "kernel's OOM killer takes it after the workload"), last
    assert last.endswith(FROM_OUTSIDE), last


def test_kill_9_of_launcher_ends_the_container_and_workload(real):
    name = f"launcher-test-{uuid.uuid4().hex[:8]}"
    proc = _start(name)
    try:
        _until(_running(name, proc), "the container never started")
        _until(_supervisor_ready(name), "the workload never started")
        pid = int(_podman("inspect", "--format", "{{.State.Pid}}", name).stdout)
        assert os.readlink(f"/proc/{pid}/fd/0").startswith("pipe:")  # the lifeline's end
        labels = json.loads(_podman("inspect", "--format", "{{json .Config.Labels}}",
                                    name).stdout)
        assert (labels["launcher.run"], labels["launcher.owner"]) == (
            name, f"{socket.gethostname()}:{proc.pid}")  # what `doctor` finds leftovers by
        proc.kill()
        proc.wait(timeout=10)
        _until(lambda: _gone(name), "the container outlived launcher", timeout=30)
        assert not Path(f"/proc/{pid}").exists()  # the supervisor, and its workload below it
    finally:
        if proc.poll() is None:
            proc.kill()
        _podman("rm", "--force", "--ignore", name)


def test_leftovers_of_a_dead_launcher_are_listed_by_doctor(real):
    dead = subprocess.Popen(["true"])
    dead.wait()
    run = f"lt-{uuid.uuid4().hex[:8]}"
    made = _podman("create", "--label", f"launcher.owner={socket.gethostname()}:{dead.pid}",
                   "--label", f"launcher.run={run}", BASE, "true")
    assert made.returncode == 0, made.stderr
    try:
        found = [x for x in PodmanEngine().leftovers() if run in x.detail]
        assert [(x.kind, x.ident, x.idle) for x in found] == [
            ("container", made.stdout.strip()[:12], True)]
        doctor = json.loads(in_process("doctor", "--json").stdout)
        assert any(x["engine"] == "podman" and run in x["detail"]
                   for x in doctor["leftovers"]), doctor["leftovers"]
    finally:
        _podman("rm", "--force", "--ignore", made.stdout.strip())


def test_missing_image_is_one_clear_line(real):
    proc = launcher("run", "--runtime", "podman", "--image", "launcher-test/none:0", "--",
                    "true")
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == (
        "error: image 'launcher-test/none:0' is not in Podman's image store; copy it from "
        "Docker's with `podman pull docker-daemon:launcher-test/none:0` (or `launcher build` "
        "it, then copy)"), proc.stderr


def test_a_container_podman_cannot_start_is_one_clear_line(real, tmp_path):
    prof = profile(tmp_path, "nproc", "extends: base\nlimits: {nproc: 40000}\n")
    proc = launcher("run", "-p", prof, *PODMAN, "--", "true")
    assert proc.returncode == 1
    last = proc.stderr.splitlines()[-1]
    assert last.startswith("error: podman could not start the container: "), proc.stderr
    assert "rlimit" in last and "Traceback" not in proc.stderr


def test_kill_9_of_a_podman_job_then_the_same_command_finishes_it(real, tmp_path):
    kill_mid_run_and_rerun(tmp_path, "podman", ["--image", BASE])
