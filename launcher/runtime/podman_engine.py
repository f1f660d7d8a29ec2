"""Podman: runs through its own CLI, no service to start or keep alive. The neutral run spec's
container plan (runtime/container.py) becomes `podman create` arguments (an argv list: no value
passes through a shell); then `podman init` (the OCI runtime sets the container up: its
refusals are told apart from the workload's exit status, and the PID is known before the
workload starts) and `podman start --attach --interactive`, whose exit status is the
workload's.

The lifeline: the container is created with an open stdin and `podman start` reads it from a
pipe that only launcher holds; when launcher dies (kill -9 included) the pipe ends, Podman
closes the container's stdin, the supervisor stops the workload and `--rm` removes the
container. Rootless (the caller is not root): `--userns=keep-id`, so what the workload writes
into mounted folders is the caller's. GPUs through CDI (`--device nvidia.com/gpu=all`) and
device nodes. Images come from Podman's own store: `podman pull docker-daemon:IMAGE` copies
one from Docker's."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import selectors
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from launcher.errors import EngineError
from launcher.runtime.container import ContainerPlan, plan
from launcher.runtime.docker_engine import orphan_containers
from launcher.runtime.engine import (
    Enforcement,
    Engine,
    Leftover,
    OutputClosed,
    OutputSink,
    RunResult,
    Started,
    StartHook,
    forward_signals,
    restore_signals,
)
from launcher.runtime.owner import OWNER_LABEL
from launcher.runtime.spec import Rlimit, RunSpec
from launcher.units import format_size

# ContainerPlan limits -> `podman create` options, values in bytes or CPUs.
_OPTIONS = {"pids": "--pids-limit", "memory": "--memory", "memory_swap": "--memory-swap",
            "memory_reservation": "--memory-reservation", "shm": "--shm-size",
            "cpus": "--cpus", "cpuset": "--cpuset-cpus"}
# Pinned where the spec leaves them out: Podman would otherwise ask for its own defaults
# (1048576 open files), which the OCI runtime refuses above the caller's hard limit ("error
# setting rlimit type 7").
_INHERITED = {"nofile": resource.RLIMIT_NOFILE, "nproc": resource.RLIMIT_NPROC}
# Podman lowers its own RLIMIT_NPROC to 32768 as it starts (strace, 4.3.1); the container
# cannot have more without CAP_SYS_RESOURCE ("error setting rlimit type 6").
_PODMAN_NPROC = 32768
_CDI_KIND = "{driver}.com/gpu"  # a device request's driver -> its CDI kind (nvidia.com/gpu)


def rootless() -> bool:
    return os.getuid() != 0


def inherited_ulimits() -> dict[str, Rlimit]:
    """The caller's own nofile and nproc (within Podman's nproc): plan()'s engine_ulimits."""
    out = {}
    for name, which in _INHERITED.items():
        cap = _PODMAN_NPROC if name == "nproc" else resource.RLIM_INFINITY
        soft, hard = (_rlim(min(v, cap)) for v in resource.getrlimit(which))
        out[name] = Rlimit(soft, hard)
    return out


def _rlim(value: int) -> int:
    return -1 if value == resource.RLIM_INFINITY else value


def create_argv(spec: RunSpec, as_rootless: bool | None = None) -> list[str]:
    """`podman create ...`: the whole run spec as arguments (without the `podman`)."""
    as_rootless = rootless() if as_rootless is None else as_rootless
    return to_argv(plan(spec, engine_ulimits=inherited_ulimits()), as_rootless)


def to_argv(p: ContainerPlan, as_rootless: bool) -> list[str]:
    """A plan as `podman create` arguments. Rootless: `--userns=keep-id`, and the caller's own
    groups, as host groups are not mapped."""
    if not p.image:
        raise EngineError("the podman runtime runs an image: pass --image")
    argv = ["create", *(["--rm"] if p.remove else []), "--pull=never"]  # never: as Docker's
    if as_rootless:
        argv.append("--userns=keep-id")
    if p.init:
        argv.append("--init")
    limits = {"pids": -1, **p.limits()}  # no limit: -1, not Podman's default 2048
    for key, value in limits.items():
        argv += [_OPTIONS[key], str(value)]
    for name, u in p.ulimits.items():
        argv += ["--ulimit", f"{name}={u.soft}:{u.hard}"]
    if p.device_request is not None:  # through CDI: all, or by id
        kind = _CDI_KIND.format(driver=p.device_request.driver)
        for ident in p.device_request.ids or ("all",):
            argv += ["--device", f"{kind}={ident}"]
    for device in p.devices:
        argv += ["--device", f"{device}:{device}:rwm"]
    if p.groups:
        for group in ("keep-groups",) if as_rootless else p.groups:
            argv += ["--group-add", group]
    if p.seccomp_unconfined:
        argv += ["--security-opt", "seccomp=unconfined"]
    for m in p.mounts:
        argv += ["--volume", f"{m.source}:{m.target}:{'ro' if m.read_only else 'rw'}"]
    if p.entrypoint is not None:
        argv += ["--entrypoint", json.dumps(list(p.entrypoint))]
    if p.stdin_open:
        argv.append("--interactive")
    for key, value in p.env.items():
        argv += ["--env", f"{key}={value}"]
    for key, value in p.labels.items():
        argv += ["--label", f"{key}={value}"]
    for flag, value in (("--name", p.name), ("--workdir", p.workdir), ("--user", p.user)):
        if value:
            argv += [flag, value]
    return [*argv, p.image, *p.command]


def start_argv(cid: str, supervised: bool) -> list[str]:
    """Attach and wait; signals reach the container only through `podman kill`."""
    return ["start", "--attach", "--sig-proxy=false", *(["--interactive"] if supervised
                                                        else []), cid]


def enforcement_of(spec: RunSpec, as_rootless: bool) -> Enforcement:
    lim = spec.limits
    given = {"pids": lim.pids and str(lim.pids),
             "memory": lim.memory and format_size(lim.memory),
             "cpus": lim.cpus and f"{lim.cpus:g}", "cpuset": lim.cpuset,
             "shm": lim.shm and format_size(lim.shm)}
    given = {k: v for k, v in given.items() if v}
    if as_rootless and not Path("/sys/fs/cgroup/cgroup.controllers").exists():
        why = "rootless Podman sets no cgroup limits on cgroup v1"
        return Enforcement({k: f"{v} (Podman)" for k, v in given.items() if k == "shm"},
                           {k: why for k in given if k != "shm"})
    return Enforcement({k: f"{v} (Podman{'' if k == 'shm' else ' cgroup'})"
                        for k, v in given.items()})


def executable() -> str:
    exe = shutil.which("podman")
    if exe is None:
        raise EngineError("podman is not installed (Debian: apt-get install podman); "
                          "or use --runtime docker or native")
    return exe


def podman(*args: str, timeout: float = 120,
           cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run `podman ARGS`; EngineError with one line when Podman is missing or errs."""
    exe = executable()
    try:
        done = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(f"podman {args[0]} failed: {exc}") from None
    if done.returncode != 0:
        raise EngineError(_error_line(done.stderr) or f"podman {args[0]} exited with "
                                                      f"status {done.returncode}")
    return done


def _error_line(stderr: str) -> str:
    lines = [x.strip() for x in stderr.splitlines() if x.strip()]
    errors = [x for x in lines if x.startswith("Error:")]
    line = (errors or lines or [""])[-1]
    return line.removeprefix("Error:").strip()[:400]


class PodmanEngine(Engine):
    name = "podman"

    def ping(self) -> None:
        try:
            podman("version", "--format", "{{.Client.Version}}", timeout=30)
        except EngineError as exc:
            raise EngineError(f"podman does not answer: {exc}") from None

    def image_exists(self, image: str | None) -> bool:
        if not image:
            return False
        try:
            podman("image", "exists", image, timeout=30)
            return True
        except EngineError:
            return False

    def describe(self, spec: RunSpec) -> dict[str, Any]:
        return {"create": ["podman", *create_argv(spec)],
                "start": ["podman", *start_argv("CONTAINER", spec.supervised)]}

    def leftovers(self) -> list[Leftover]:
        """Containers labelled with an owner launcher that ran here and is gone."""
        if shutil.which("podman") is None:
            return []
        found = json.loads(podman("ps", "--all", "--filter", f"label={OWNER_LABEL}",
                                  "--format", "json", timeout=60).stdout or "[]")
        return orphan_containers(found, idle=("created", "initialized"))

    def remove(self, leftover: Leftover) -> None:
        try:
            podman("rm", "--force", "--ignore", leftover.ident, timeout=60)
        except EngineError as exc:
            raise EngineError(f"cannot remove container {leftover.ident}: {exc}") from None

    def run(self, spec: RunSpec, on_output: OutputSink,
            on_start: StartHook | None = None) -> RunResult:
        """Create, init, attach and start; stream; remove in any case."""
        executable()  # missing: that line alone
        as_rootless = rootless()
        cid = _create(spec, as_rootless)
        enforcement = enforcement_of(spec, as_rootless)
        stopping: list[int] = []  # the signals launcher was asked to stop with

        def stop(signum: int, _frame: object) -> None:
            _kill(cid, signal.SIGKILL if stopping else signal.Signals(signum))
            stopping.append(signum)

        old = forward_signals(stop)
        proc: subprocess.Popen[bytes] | None = None
        try:
            # conmon starts here and stays in this folder: it writes a file `oom` into its
            # working directory on an OOM kill (conmon#504), so not the caller's but the
            # container's own, which goes with it
            home = podman("inspect", "--format", "{{.StaticDir}}", cid).stdout.strip()
            try:
                podman("init", cid, cwd=home)
            except EngineError as exc:
                raise EngineError(f"podman could not start the container: {exc}") from None
            if stopping:  # before it started: it never will (`finally` removes it)
                return RunResult(128 + stopping[0], enforcement)
            ended, starter = threading.Event(), None
            if on_start is not None:  # the PID for telemetry, beside the output
                starter = threading.Thread(target=_announce, daemon=True, args=(
                    cid, _pid(cid), enforcement, on_start, ended))
                starter.start()
            proc = _attach(cid, spec.supervised, home)
            _pump(proc, on_output)
            status = proc.wait()
            ended.set()
            if proc.stdin is not None:
                proc.stdin.close()
            if starter is not None:
                starter.join()
            return RunResult(status, enforcement)
        finally:
            restore_signals(old)
            if proc is None or proc.poll() is None:  # it did not end: --rm did not remove it
                if proc is not None:
                    proc.kill()
                _quiet(lambda: podman("rm", "--force", "--ignore", cid, timeout=60))


def _create(spec: RunSpec, as_rootless: bool) -> str:
    try:
        return podman(*create_argv(spec, as_rootless)).stdout.strip()
    except EngineError as exc:
        if "image not known" in str(exc):
            raise EngineError(f"image {spec.image!r} is not in Podman's image store; copy it "
                              f"from Docker's with `podman pull docker-daemon:{spec.image}` "
                              f"(or `launcher build` it, then copy)") from None
        raise EngineError(f"podman refused the container: {exc}") from None


def _attach(cid: str, supervised: bool, cwd: str) -> subprocess.Popen[bytes]:
    """`podman start --attach`, in its own session (a terminal's Ctrl-C reaches launcher,
    which stops the container). Only launcher holds its stdin: that is the lifeline."""
    return subprocess.Popen([executable(), *start_argv(cid, supervised)],
                            stdin=subprocess.PIPE if supervised else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                            start_new_session=True)


def _pump(proc: subprocess.Popen[bytes], on_output: OutputSink) -> None:
    """Pass stdout and stderr on as they come, until both end."""
    streams: dict[IO[bytes], str] = {proc.stdout: "stdout", proc.stderr: "stderr"}  # type: ignore[dict-item]
    with selectors.DefaultSelector() as sel:
        for pipe, name in streams.items():
            sel.register(pipe, selectors.EVENT_READ, name)
        while sel.get_map():
            for key, _ in sel.select():
                data = os.read(key.fd, 65536)
                try:
                    if data:
                        on_output(key.data, data)
                        continue
                except OutputClosed:  # the reader is gone: so is the workload's pipe
                    key.fileobj.close()  # type: ignore[union-attr]
                sel.unregister(key.fileobj)


def _pid(cid: str) -> int | None:
    """The container's PID once it is initialized (before `start`, which holds the
    container's lock until the end)."""
    with contextlib.suppress(Exception):  # telemetry must not stop the run
        return int(podman("inspect", "--format", "{{.State.Pid}}", cid, timeout=30).stdout)
    return None


def _announce(cid: str, pid: int | None, enforcement: Enforcement, on_start: StartHook,
              ended: threading.Event) -> None:
    """Announced when the OCI runtime's init process has become the supervisor: telemetry
    then counts the workload's threads, not the runtime's."""
    if pid:
        init = _comm(pid)
        while _comm(pid) == init and not ended.wait(0.01):
            pass
    on_start(Started(pid or None, enforcement, lambda sig: _kill(cid, signal.Signals(sig))))


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text()
    except OSError:
        return ""


def _kill(cid: str, sig: signal.Signals) -> None:
    _quiet(lambda: podman("kill", "--signal", sig.name, cid, timeout=30))


def _quiet(fn: Callable[[], object]) -> None:
    with contextlib.suppress(Exception):  # best effort during teardown
        fn()
