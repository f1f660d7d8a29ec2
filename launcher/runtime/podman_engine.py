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
import functools
import json
import os
import resource
import selectors
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from launcher.cgroups.advisory import Advisory
from launcher.cgroups.leaf import undo_leaf
from launcher.cgroups.placement import Placement, own_processes, place
from launcher.cgroups.run_cgroup import make_placed
from launcher.errors import EngineError
from launcher.runtime.container import ContainerPlan, plan
from launcher.runtime.engine import (
    STOPS,
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
from launcher.runtime.owner import OWNER_LABEL, orphan_containers
from launcher.runtime.spec import Rlimit, RunSpec
from launcher.units import format_size
from launcher.vendors.base import DeviceRequest

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
# Rootless: why a cgroup limit is not kept (each limit's controller: _CONTROLLERS)
_V1_ROOTLESS = Advisory("rootless Podman sets no cgroup limits on cgroup v1 and starts the "
                        "container without them", "run as root, or on a cgroup v2 host")
_DELEGATE = "a systemd drop-in for user@.service with Delegate= adds it"
_CDI_DIRS = ("/etc/cdi", "/var/run/cdi")  # where Podman reads CDI specs
_HOST_ROOT = Path("/")  # where a vendor finds its device nodes
_CGROUP2 = "/sys/fs/cgroup"
_CONTROLLERS = {"pids": "pids", "memory": "memory", "cpus": "cpu", "cpuset": "cpuset"}


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


def create_argv(spec: RunSpec, as_rootless: bool | None = None,
                cgroup_parent: str | None = None) -> list[str]:
    """`podman create ...`: the whole run spec as arguments (without the `podman`)."""
    as_rootless = rootless() if as_rootless is None else as_rootless
    return to_argv(plan(spec, engine_ulimits=inherited_ulimits()), as_rootless, cgroup_parent)


def to_argv(p: ContainerPlan, as_rootless: bool, cgroup_parent: str | None = None) -> list[str]:
    """A plan as `podman create` arguments. Rootless: `--userns=keep-id`, and the caller's own
    groups, as host groups are not mapped."""
    if not p.image:
        raise EngineError("the podman runtime runs an image: pass --image")
    argv = ["create", *(["--rm"] if p.remove else []), "--pull=never"]  # never: as Docker's
    if as_rootless:
        argv.append("--userns=keep-id")
    if p.init:
        argv.append("--init")
    if cgroup_parent:  # under the caller's cgroup (cgroup_parent())
        argv += ["--cgroup-parent", cgroup_parent]
    limits = {"pids": -1, **p.limits()}  # no limit: -1, not Podman's default 2048
    for key, value in limits.items():
        argv += [_OPTIONS[key], str(value)]
    for name, u in p.ulimits.items():
        argv += ["--ulimit", f"{name}={u.soft}:{u.hard}"]
    if p.device_request is not None:  # through CDI: all, or by id; else the device nodes
        kind = _CDI_KIND.format(driver=p.device_request.driver)
        nodes = None if cdi_spec(kind) else device_nodes(p.device_request)
        for ident in () if nodes is not None else p.device_request.ids or ("all",):
            argv += ["--device", f"{kind}={ident}"]
        for node in nodes or ():
            argv += ["--device", f"{node}:{node}:rwm"]
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


def cdi_spec(kind: str) -> bool:
    """Whether a CDI spec names `kind` (nvidia-ctk writes one); Podman refuses a CDI device
    that none names ("unresolvable CDI devices")."""
    for d in _CDI_DIRS:
        with contextlib.suppress(OSError):
            for f in sorted(Path(d).iterdir()):
                if f.suffix in (".yaml", ".yml", ".json") and kind in f.read_text():
                    return True
    return False


def device_nodes(request: DeviceRequest) -> list[str] | None:
    """Without CDI, the request as its vendor's device nodes (vendors/*.py: NVIDIA's control
    nodes and each GPU's /dev/nvidiaN); None where the vendor has none."""
    from launcher.vendors import get, known

    return get(request.driver).device_nodes(request, _HOST_ROOT) if known(
        request.driver) else None


def cgroup_parent(spec: RunSpec) -> tuple[str | None, Callable[[], None]]:
    """Root on cgroup v2: a cgroup under the caller's own for `--cgroup-parent` (Podman's
    cgroupfs default, /libpod_parent, is beside it, out from under every limit the caller
    runs under). The caller's cgroup holds launcher, and a cgroup that gives controllers to
    children may hold no process: launcher's processes move into its leaf first where the
    limits need controllers (cgroups/placement.py's rule, never its place beside). Else the
    caller's cgroup itself, where the OCI runtime refuses a limit it cannot enforce. The
    parent's path, and what puts the caller's cgroup back."""
    own = next((line[3:] for line in _read(Path("/proc/self/cgroup")).splitlines()
                if line.startswith("0::")), None)
    if rootless() or own is None or not Path(_CGROUP2, "cgroup.controllers").exists():
        return None, lambda: None
    if _host_info().get("cgroupManager") != "cgroupfs":  # systemd takes slices only
        return None, lambda: None
    # pids always (--pids-limit is always passed, -1 where none is asked), and whatever the
    # caller's cgroup can pass on: crun enables them on every level down to the container's,
    # which fails (EBUSY) at a level that holds a process, as the caller's does
    wanted = ["pids", *(_CONTROLLERS[k] for k in spec.limits.given() if k in _CONTROLLERS),
              *_read(Path(_CGROUP2 + own.rstrip("/"), "cgroup.controllers")).split()]
    with contextlib.suppress(Exception):  # no placement: an empty child of the caller's
        for p in place(dict.fromkeys(wanted)).placements:
            if p.version != "v2" or p.mode == "beside" or p.caller is None:
                continue
            enabled = tuple(c for e, cs in p.enable if e == p.parent for c in cs)
            try:
                made = make_placed(p, f"launcher-podman-{os.getpid()}")
            except OSError:
                if p.leaf is not None:  # launcher's processes back, as make_run_cgroup does
                    undo_leaf(p.parent, enabled, p.leaf)
                raise

            def undo(made: Path = made, p: Placement = p, enabled: tuple[str, ...] = enabled
                     ) -> None:
                _rmdirs(made)
                if p.leaf is not None:
                    undo_leaf(p.parent, enabled, p.leaf)
            return f"{own.rstrip('/')}/{made.relative_to(p.caller)}", undo
    mine = Path(_CGROUP2 + own.rstrip("/"))
    others = set(_read(mine / "cgroup.procs").split()) - {str(x) for x in own_processes()}
    if others and _read(mine / "cgroup.controllers").split() and own != "/":
        # crun would enable them in it (EBUSY), then turn the caller's cgroup threaded
        raise EngineError(f"podman: the container's cgroup cannot go under {own}, which holds "
                          f"other processes (PID {', '.join(sorted(others, key=int)[:3])}); "
                          f"start launcher as the only process of a cgroup (`systemd-run "
                          f"--scope launcher run ...`)")
    made = mine / f"launcher-podman-{os.getpid()}"
    try:  # no controller enabled for it, but no process in it either (unlike the caller's)
        made.mkdir(exist_ok=True)
    except OSError:
        return own, lambda: None
    return f"{own.rstrip('/')}/{made.name}", lambda: _rmdirs(made)


def _check_controllers(spec: RunSpec, parent: str | None) -> None:
    """Refuse, in one line, a limit whose controller the container's cgroup cannot have: the
    OCI runtime would fail on it, or enforce nothing."""
    if parent is None:
        return
    have = set(_read(Path(_CGROUP2 + parent, "cgroup.controllers")).split())
    lacking = [f"{k} ({_CONTROLLERS[k]})" for k in spec.limits.given()
               if k in _CONTROLLERS and _CONTROLLERS[k] not in have]
    if lacking:
        raise EngineError(f"cannot enforce {', '.join(lacking)} with Podman here: the "
                          f"container's cgroup under {parent} can have only "
                          f"[{' '.join(sorted(have))}] (the cgroups above do not delegate "
                          f"more); not started")


def _rmdirs(made: Path) -> None:
    """The cgroup made for the container's, once the container's (and conmon's) are gone."""
    for _ in range(50):  # they may take a moment
        for d in [*(x for x in made.glob("*") if x.is_dir()), made]:
            _quiet(d.rmdir)
        if not made.exists():
            break
        time.sleep(0.1)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def start_argv(cid: str) -> list[str]:
    """Attach and wait; signals reach the container only through `podman kill`; its stdin
    is the supervisor's lifeline."""
    return ["start", "--attach", "--sig-proxy=false", "--interactive", cid]


def enforcement_of(spec: RunSpec, as_rootless: bool) -> Enforcement:
    """Which of the spec's limits the kernel keeps: as root, all; rootless, the shm size (a
    tmpfs) and the cgroup limits whose controllers this user may use (_rootless_lacks)."""
    given = _given(spec)
    lacking = _rootless_lacks(list(given)) if as_rootless else {}
    return Enforcement({k: f"{v} (Podman{'' if k == 'shm' else ' cgroup'})"
                        for k, v in given.items() if k not in lacking}, lacking)


def _given(spec: RunSpec) -> dict[str, str]:
    lim = spec.limits
    given = {"pids": lim.pids and str(lim.pids),
             "memory": lim.memory and format_size(lim.memory),
             "cpus": lim.cpus and f"{lim.cpus:g}", "cpuset": lim.cpuset,
             "shm": lim.shm and format_size(lim.shm)}
    return {k: v for k, v in given.items() if v}


def _rootless_lacks(limits: list[str]) -> dict[str, str]:
    """Each cgroup limit rootless Podman cannot have kept here, and why: on cgroup v1 every
    one (Podman says "Resource limits are not supported and ignored on cgroups V1 rootless
    systems" and starts the container unlimited); on v2 those whose controller is not
    delegated to this user (systemd delegates memory, pids and cpu, not cpuset or io)."""
    cgroup = [k for k in limits if k in _CONTROLLERS]
    if not cgroup:
        return {}
    if not Path("/sys/fs/cgroup/cgroup.controllers").exists():
        return dict.fromkeys(cgroup, _V1_ROOTLESS)
    info = _host_info()
    if "cgroupControllers" not in info:
        return dict.fromkeys(cgroup, "`podman info` did not answer, so which controllers this "
                                     "user may use is unknown")
    have = frozenset(info["cgroupControllers"] or ())
    if info.get("cgroupManager") != "systemd":  # a user may create no cgroup of its own
        return dict.fromkeys(cgroup, Advisory("rootless Podman without a systemd user session "
                                              "(cgroup manager cgroupfs) sets no cgroup limits",
                                              "log in through systemd (loginctl enable-linger "
                                              "USER)"))
    seen = " ".join(sorted(have)) or "none"
    return {k: Advisory(f"no {_CONTROLLERS[k]} controller delegated to this user, who has "
                        f"{seen}", _DELEGATE) for k in cgroup if _CONTROLLERS[k] not in have}


@functools.cache
def _host_info() -> dict[str, Any]:
    """`podman info`'s host section (cgroupManager, cgroupControllers); {} where Podman does
    not answer (asked once: a failure is not retried within one launcher)."""
    with contextlib.suppress(EngineError, ValueError, KeyError, TypeError):
        info = json.loads(podman("info", "--format", "json", timeout=60).stdout)
        host = info["host"]
        return host if isinstance(host, dict) else {}
    return {}


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
                "start": ["podman", *start_argv("CONTAINER")]}

    def preview(self, spec: RunSpec) -> Enforcement:
        return enforcement_of(spec, rootless())

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
        enforcement = enforcement_of(spec, as_rootless)
        if spec.required_by and enforcement.advisory:  # nothing created
            raise EngineError(enforcement.refusal(spec.required_by))
        parent, put_back = cgroup_parent(spec)
        try:
            _check_controllers(spec, parent)
            cid = _create(spec, as_rootless, parent)
        except BaseException:  # nothing created: launcher's cgroup back as it was
            put_back()
            raise
        stopping: list[int] = []  # the signals launcher was asked to stop with

        def stop(signum: int, _frame: object) -> None:
            _kill(cid, signal.SIGKILL if stopping else signal.Signals(signum))
            if signum in STOPS:
                stopping.append(signum)

        old = forward_signals(stop)
        proc: subprocess.Popen[bytes] | None = None
        try:
            # conmon starts here and stays in this folder: it writes a file `oom` into its
            # working directory on an OOM kill (conmon#504), so not the caller's but the
            # container's own, which goes with it
            home = _conmon_dir(podman("inspect", "--format", "{{.StaticDir}}",
                                      cid).stdout.strip())
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
            proc = _attach(cid, home)
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
            put_back()  # the cgroup made for it, launcher's processes back


def _create(spec: RunSpec, as_rootless: bool, parent: str | None = None) -> str:
    try:
        return podman(*create_argv(spec, as_rootless, parent)).stdout.strip()
    except EngineError as exc:
        if "image not known" in str(exc):
            raise EngineError(f"image {spec.image!r} is not in Podman's image store; copy it "
                              f"from Docker's with `podman pull docker-daemon:{spec.image}` "
                              f"(or `launcher build` it, then copy)") from None
        raise EngineError(f"podman refused the container: {exc}") from None


def _conmon_dir(static_dir: str) -> str:
    """The container's own folder that this caller may enter: its StaticDir, or (rootless,
    where `--userns=keep-id` gives StaticDir to a subordinate UID the caller cannot enter)
    the folder above it, the caller's, which `--rm` removes with it."""
    return static_dir if os.access(static_dir, os.X_OK) else str(Path(static_dir).parent)


def _attach(cid: str, cwd: str) -> subprocess.Popen[bytes]:
    """`podman start --attach`, in its own session (a terminal's Ctrl-C reaches launcher,
    which stops the container). Only launcher holds its stdin: that is the lifeline."""
    return subprocess.Popen([executable(), *start_argv(cid)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                            start_new_session=True)


def _pump(proc: subprocess.Popen[bytes], on_output: OutputSink) -> None:
    """Pass stdout and stderr on as they come, until both end. A reader that goes away
    (`| head -1`): the supervisor is told over its stdin, as in Docker, and closes the
    workload's pipe, whose next write meets SIGPIPE; the rest of that stream is dropped."""
    streams: dict[IO[bytes], str] = {proc.stdout: "stdout", proc.stderr: "stderr"}  # type: ignore[dict-item]
    gone: set[str] = set()
    with selectors.DefaultSelector() as sel:
        for pipe, name in streams.items():
            sel.register(pipe, selectors.EVENT_READ, name)
        while sel.get_map():
            for key, _ in sel.select():
                data = os.read(key.fd, 65536)
                if not data:
                    sel.unregister(key.fileobj)
                    continue
                if key.data in gone:
                    continue
                try:
                    on_output(key.data, data)
                except OutputClosed:
                    gone.add(key.data)
                    if proc.stdin is None:  # no supervisor to tell: its pipe closes
                        sel.unregister(key.fileobj)
                        key.fileobj.close()  # type: ignore[union-attr]
                        continue
                    with contextlib.suppress(OSError):
                        proc.stdin.write(f"closed {key.data}\n".encode())
                        proc.stdin.flush()


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
