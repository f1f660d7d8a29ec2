"""Docker: runs through a small standard-library Engine API client (docker_api.py), builds
through the docker SDK (imported only for a build). The only module that speaks Docker's
vocabulary: a container plan (runtime/container.py) is translated here into the daemon's create
request."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from launcher.errors import EngineError
from launcher.runtime.container import ContainerPlan, plan
from launcher.runtime.engine import (
    STOPS,
    BuildEvent,
    Enforcement,
    Engine,
    ImageNotFound,
    Leftover,
    OutputClosed,
    OutputSink,
    RunResult,
    Started,
    StartHook,
    forward_signals,
    restore_signals,
)
from launcher.runtime.owner import OWNER_LABEL, is_orphan, orphan_containers
from launcher.runtime.spec import RunSpec
from launcher.units import format_size

_STEP = re.compile(r"^Step \d+/\d+ :")

# ContainerPlan limits -> HostConfig fields; NanoCpus in billionths of a CPU.
_HOST_CONFIG = {"pids": "PidsLimit", "memory": "Memory", "memory_swap": "MemorySwap",
                "memory_reservation": "MemoryReservation", "shm": "ShmSize",
                "cpus": "NanoCpus", "cpuset": "CpusetCpus"}


def create_request(spec: RunSpec) -> dict[str, Any]:
    """The Engine API's POST /containers/create: {"query": ..., "body": ...}."""
    return to_request(plan(spec))


def to_request(p: ContainerPlan) -> dict[str, Any]:
    """A plan in the Engine API's terms (no limit: Docker's default is none)."""
    host: dict[str, Any] = {"Init": p.init, "AutoRemove": p.remove}  # Init pinned either way
    for key, value in p.limits().items():
        host[_HOST_CONFIG[key]] = int(value * 1e9) if key == "cpus" else value
    if p.ulimits:
        host["Ulimits"] = [{"Name": n, "Soft": u.soft, "Hard": u.hard}
                           for n, u in p.ulimits.items()]
    if (r := p.device_request) is not None:
        host["DeviceRequests"] = [{"Driver": r.driver, "Count": -1 if r.ids is None else 0,
                                   "DeviceIDs": None if r.ids is None else list(r.ids),
                                   "Capabilities": [list(r.capabilities)]}]
    if p.devices:
        host["Devices"] = [{"PathOnHost": d, "PathInContainer": d, "CgroupPermissions": "rwm"}
                           for d in p.devices]
    if p.groups:
        host["GroupAdd"] = list(p.groups)
    if p.seccomp_unconfined:
        host["SecurityOpt"] = ["seccomp=unconfined"]
    if p.mounts:
        host["Binds"] = [f"{m.source}:{m.target}:{'ro' if m.read_only else 'rw'}"
                         for m in p.mounts]
    body: dict[str, Any] = {
        "Image": p.image,
        "Cmd": list(p.command),
        "Env": [f"{k}={v}" for k, v in p.env.items()],
        "Labels": dict(p.labels),
        "AttachStdout": True,
        "AttachStderr": True,
        "HostConfig": host,
    }
    if p.entrypoint is not None:
        body["Entrypoint"] = list(p.entrypoint)
    if p.stdin_open:  # see supervise/lifeline.py
        body.update(OpenStdin=True, StdinOnce=True, AttachStdin=True)
    if p.tty:
        body["Tty"] = True
    if p.workdir:
        body["WorkingDir"] = p.workdir
    if p.user:
        body["User"] = p.user
    return {"query": {"name": p.name} if p.name else {}, "body": body}


def enforcement_of(spec: RunSpec) -> Enforcement:
    lim, how = spec.limits, "(Docker cgroup)"
    enforced = {}
    if lim.pids:
        enforced["pids"] = f"{lim.pids} {how}"
    if lim.memory:
        enforced["memory"] = f"{format_size(lim.memory)} {how}"
    if lim.cpus:
        enforced["cpus"] = f"{lim.cpus:g} {how}"
    if lim.shm:
        enforced["shm"] = f"{format_size(lim.shm)} (Docker)"
    if lim.cpuset:
        enforced["cpuset"] = f"{lim.cpuset} {how}"
    return Enforcement(enforced)


class DockerEngine(Engine):
    name = "docker"
    can_build = True
    auto_rank = 0  # `--runtime auto` tries it first

    def __init__(self) -> None:
        self._client: Any = None

    @property
    def client(self) -> Any:
        """The docker SDK client, for builds only."""
        if self._client is None:
            import docker

            try:
                self._client = docker.from_env(timeout=600)
                self._client.ping()
            except Exception as exc:  # noqa: BLE001 - the SDK raises many kinds
                from launcher.runtime.docker_api import unreachable

                host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
                msg = unreachable(host, RuntimeError(_short(exc)))
                raise EngineError(msg if msg.startswith("permission denied") else
                                  f"{msg}, or use --runtime native") from None
        return self._client

    def ping(self) -> None:
        from launcher.runtime.docker_api import DockerAPI

        DockerAPI().ping()

    def image_exists(self, image: str | None) -> bool:
        from launcher.runtime.docker_api import DockerAPI

        if not image:
            return False
        try:
            DockerAPI().request("GET", f"/images/{image}/json", timeout=10)
            return True
        except EngineError:  # no such image, or no daemon
            return False

    def describe(self, spec: RunSpec) -> dict[str, Any]:
        return create_request(spec)

    def leftovers(self) -> list[Leftover]:
        """Containers labelled with an owner launcher that ran here and is gone (one round
        trip: no daemon answers, no leftovers; one the daemon is removing is none)."""
        from launcher.runtime.docker_api import ApiError, DockerAPI

        try:
            found = DockerAPI().request("GET", "/containers/json", query={
                "all": "1", "filters": json.dumps({"label": [OWNER_LABEL]})}, timeout=10)
        except ApiError:
            raise
        except EngineError:
            return []
        return orphan_containers([c for c in found if not _removed_by_daemon(c)],
                                 idle=("created",))

    def remove(self, leftover: Leftover) -> None:
        """Removed; one seen idle (never started) without force, so that one started since
        it was listed is not killed: the daemon refuses, and it is left behind (reported)."""
        from launcher.runtime.docker_api import ApiError, DockerAPI

        try:
            DockerAPI().request("DELETE", f"/containers/{leftover.ident}",
                                query={} if leftover.idle else {"force": "1"})
        except ApiError as exc:
            going = exc.status == 409 and "already in progress" in str(exc)  # --rm's own removal
            if exc.status != 404 and not going:
                raise EngineError(f"cannot remove container {leftover.ident}: {exc}") from None

    def build(self, context: Path, tag: str, labels: dict[str, str],
              on_event: Callable[[BuildEvent], None], no_cache: bool = False) -> str:
        image_id = ""
        try:
            for chunk in self.client.api.build(path=str(context), tag=tag, labels=labels,
                                               decode=True, rm=True, forcerm=True,
                                               nocache=no_cache):
                if "error" in chunk:
                    on_event(BuildEvent("error", chunk["error"].strip()))
                    raise EngineError(f"build of {tag} failed: {chunk['error'].strip()}")
                if "stream" in chunk:
                    for line in chunk["stream"].splitlines():
                        if line.strip():
                            on_event(BuildEvent("step" if _STEP.match(line) else "output", line))
                aux = chunk.get("aux")
                if isinstance(aux, dict) and "ID" in aux:
                    image_id = aux["ID"]
        except EngineError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise EngineError(f"build of {tag} failed: {_short(exc)}") from None
        if not image_id:
            image_id = self.client.images.get(tag).id
        on_event(BuildEvent("done", image_id))
        return image_id

    def push(self, image: str, on_event: Callable[[BuildEvent], None]) -> None:
        repo, _, tag = image.rpartition(":") if ":" in image.rsplit("/", 1)[-1] else (image, "",
                                                                                     "latest")
        try:
            for chunk in self.client.api.push(repo, tag=tag, stream=True, decode=True):
                if "error" in chunk:
                    raise EngineError(f"push of {image} failed: {chunk['error'].strip()}")
                status = chunk.get("status")
                if status:
                    on_event(BuildEvent("output", f"{chunk.get('id', '')} {status} "
                                                  f"{chunk.get('progress', '')}".strip()))
        except EngineError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise EngineError(f"push of {image} failed: {_short(exc)}") from None

    def pull(self, image: str, on_event: Callable[[BuildEvent], None]) -> None:
        """POST /images/create, its progress summed over the layers, one event a second at
        most; a failure is one line naming the image."""
        from launcher.runtime.docker_api import ApiError, DockerAPI

        progress = PullProgress(image)
        try:
            for msg in DockerAPI().pull(image):
                if "error" in msg:
                    raise EngineError(pull_failed(image, str(msg["error"])))
                line = progress.update(msg)
                if line:
                    on_event(BuildEvent("output", line))
        except ApiError as exc:
            raise EngineError(pull_failed(image, str(exc))) from None
        on_event(BuildEvent("done", progress.done()))

    def run(self, spec: RunSpec, on_output: OutputSink,
            on_start: StartHook | None = None) -> RunResult:
        """Create with AutoRemove; attach and register the waits for its exit and for its
        removal before start (as `docker run --rm` does); stream. The stream's end is the
        supervisor's: the status is the one its exit file reports, and the daemon's own end of
        the container (its exit, then AutoRemove: 50-80 ms more) goes on beside launcher's.
        After a stop (a signal forwarded) or without that file (the supervisor killed) the
        status is the daemon's, and the removal is waited for beside the caller's end of the
        run (a thread the interpreter joins before it exits): nothing is left when launcher
        returns. A run that did not end is removed here."""
        from launcher import contract
        from launcher.runtime import console
        from launcher.runtime.docker_api import ApiError, DockerAPI

        api = DockerAPI()
        fifo = None  # -i/-t: stdin is the user's, the lifeline a FIFO
        lifeline = spec.supervisor_env().get(contract.LIFELINE_PATH)
        if lifeline:
            fifo = console.FifoLifeline(lifeline)
        try:
            cid = _create(api, spec)
        except BaseException:
            if fifo is not None:
                fifo.close()
            raise
        stopping = threading.Event()
        enforcement = enforcement_of(spec)

        def stop(signum: int, _frame: object) -> None:
            sig = "SIGKILL" if stopping.is_set() else signal.Signals(signum).name
            if signum in STOPS:
                stopping.set()
            _quiet(lambda: api.request("POST", f"/containers/{cid}/kill", query={"signal": sig}))

        old = forward_signals(stop)
        finished = False
        removal = None
        undo_resize = None
        terminal = contextlib.ExitStack()
        try:
            frames = api.attach(cid, stdin=True, tty=spec.tty)
            waiter = api.wait_stream(cid)
            removal = api.wait_stream(cid, "removed")
            try:
                api.request("POST", f"/containers/{cid}/start")
            except ApiError as exc:
                raise EngineError(f"the daemon could not start the container: {exc}") from None
            if spec.tty:  # its terminal takes this one's size, now and on each change
                undo_resize = console.on_resize(lambda h, w: api.request(
                    "POST", f"/containers/{cid}/resize", query={"h": h, "w": w}))
            if spec.interactive:  # launcher's stdin is its; a terminal here: raw, as docker
                if spec.tty:
                    terminal.enter_context(console.raw_terminal())
                console.relay_stdin(api.attached)
            starter = None
            if on_start is not None:  # the PID for telemetry, beside the container's start
                starter = threading.Thread(target=_announce, args=(
                    api, cid, enforcement, on_start, stopping), daemon=True)
                starter.start()
            closed: set[int] = set()
            announcing = starter
            for stream, data in frames:  # drained to the end: the container must not block
                if announcing is not None:  # the start line before the workload's first byte
                    announcing.join(ANNOUNCE_S)  # (a busy daemon answers the inspect late)
                    announcing = None
                if stream in closed:
                    continue
                try:
                    on_output("stderr" if stream == 2 else "stdout", data)
                except OutputClosed:  # the reader is gone: the rest of the stream is dropped,
                    closed.add(stream)  # and the supervisor told: the workload's pipe closes
                    if fifo is not None:
                        fifo.say(reader_words(stream))
                    else:
                        reader_gone(getattr(api, "attached", None), stream)
            # after a stop (Ctrl-C, kill): nothing left when launcher returns, as always
            status = None if stopping.is_set() else _reported_status(spec)
            if status is None:  # else no word from the supervisor: the daemon's, and removal
                status = int(json.loads(waiter.read() or b"{}").get("StatusCode", 1))
                _await_removal(removal)
                removal = None
            waiter.sock.close()
            if starter is not None:
                starter.join()
            finished = True
            return RunResult(status, enforcement)
        finally:
            terminal.close()
            if undo_resize is not None:
                undo_resize()
            restore_signals(old)
            if fifo is not None:
                fifo.close()
            if removal is not None:
                removal.sock.close()
            if not finished:  # AutoRemove removes a container that ended; this one did not
                _quiet(lambda: api.request("DELETE", f"/containers/{cid}",
                                           query={"force": "1"}))


def _removed_by_daemon(listed: dict[str, Any]) -> bool:
    """An ended container of a launcher gone that the daemon removes itself (AutoRemove; a
    restarted daemon too): exited, or still running for the daemon while its supervisor has
    written its exit file (launcher returns then, some 50-80 ms before the daemon's exit and
    removal; longer on a busy host). One the daemon cannot say of is reported."""
    from launcher.runtime.docker_api import ApiError, DockerAPI

    if listed.get("State") not in ("exited", "running") or not is_orphan(
            (listed.get("Labels") or {}).get(OWNER_LABEL, "")):
        return False
    try:
        found = DockerAPI().request("GET", f"/containers/{listed['Id']}/json", timeout=10)
    except ApiError as exc:
        return exc.status == 404  # gone meanwhile: nothing to report
    except EngineError:
        return False
    return _removes_itself(found) or (
        bool((found.get("HostConfig") or {}).get("AutoRemove")) and _supervisor_ended(found))


def _supervisor_ended(inspected: dict[str, Any]) -> bool:
    """Its supervisor wrote its exit file: the run is over (a killed launcher's writes none)."""
    from launcher import contract

    prefix = contract.EXIT_FILE + "="
    paths = [e[len(prefix):] for e in (inspected.get("Config") or {}).get("Env") or []
             if e.startswith(prefix)]
    return bool(paths) and contract.read_exit(paths[0]) is not None


def _removes_itself(inspected: dict[str, Any]) -> bool:
    """An inspected container that has ended and that the daemon removes (AutoRemove)."""
    return ((inspected.get("State") or {}).get("Status") in ("exited", "removing")
            and bool((inspected.get("HostConfig") or {}).get("AutoRemove")))


def _reported_status(spec: RunSpec) -> int | None:
    """The status the supervisor wrote into its exit file before it ended (the stream's end
    is its end): the run is over, and the daemon's own teardown of the container (its exit,
    then AutoRemove: some 50-80 ms) goes on without launcher waiting for it."""
    from launcher import contract

    path = spec.env.get(contract.EXIT_FILE)
    ended = contract.read_exit(path) if path else None
    return None if ended is None else int(ended["status"])


REMOVAL_S = 30.0  # the most an exit waits for the daemon to remove an ended container
ANNOUNCE_S = 5.0  # the most the workload's output waits for the start line


def _create(api: Any, spec: RunSpec) -> str:
    """POST /containers/create. A name still held by the ended container of a run before
    (`--name` or `--resume` again at once: launcher returned before the daemon removed it) is
    waited for, once, and the create tried again."""
    from launcher.runtime.docker_api import ApiError

    req = create_request(spec)

    def create() -> str:
        return str(api.request("POST", "/containers/create", req["body"], req["query"])["Id"])

    try:
        try:
            return create()
        except ApiError as exc:
            if not (exc.status == 409 and spec.name and _ending(api, spec.name)):
                raise
        return create()
    except ApiError as exc:
        if exc.status == 404:
            raise ImageNotFound(f"image {spec.image!r} not found; build it with `launcher "
                                f"build` or pass --image") from None
        raise EngineError(f"the daemon refused the container: {exc}") from None


def _ending(api: Any, name: str) -> bool:
    """The container named `name` has ended and the daemon removes it itself (AutoRemove):
    True once it is gone (REMOVAL_S at most); False for any other holder of the name."""
    from launcher.runtime.docker_api import ApiError

    try:
        found = api.request("GET", f"/containers/{name}/json", timeout=10)
    except ApiError as exc:
        return exc.status == 404  # gone meanwhile
    if not _removes_itself(found):
        return False
    removal = api.wait_stream(found["Id"], "removed")
    removal.sock.settimeout(REMOVAL_S)
    with contextlib.suppress(Exception):  # gone already (404), or the wait ran out
        removal.read()
    removal.sock.close()
    return True


def _await_removal(removal: Any) -> None:
    """The daemon removes the ended container (AutoRemove) some 10-30 ms after its exit: that
    wait runs in a thread that the interpreter joins before it exits (not a daemon thread), so
    the caller writes its summary meanwhile and launcher still leaves no container behind."""
    removal.sock.settimeout(REMOVAL_S)

    def wait() -> None:
        with contextlib.suppress(Exception):  # gone, or the daemon with it: nothing to do
            removal.read()
        removal.sock.close()

    threading.Thread(target=wait, name="launcher-removal").start()


def pull_failed(image: str, why: str) -> str:
    first = (why.strip().splitlines() or ["no reason given"])[0]
    return f"cannot pull {image}: {first}"


class PullProgress:
    """The daemon's per-layer pull messages as one line: layers done and bytes fetched."""

    def __init__(self, image: str, every: float = 1.0) -> None:
        self.image = image
        self.every = every
        self.last = 0.0
        self.layers: dict[str, tuple[int, int]] = {}  # id -> (current, total) bytes
        self.finished: set[str] = set()

    def update(self, msg: dict[str, Any]) -> str | None:
        import time

        layer, status = msg.get("id"), str(msg.get("status", ""))
        detail = msg.get("progressDetail") or {}
        if layer and status == "Downloading" and detail.get("total"):
            self.layers[layer] = (int(detail.get("current", 0)), int(detail["total"]))
        elif layer and status in ("Pull complete", "Already exists", "Download complete"):
            self.finished.add(layer)
        elif layer and status.startswith(("Pulling fs layer", "Waiting")):
            self.layers.setdefault(layer, (0, 0))
        now = time.monotonic()
        if now - self.last < self.every:
            return None
        self.last = now
        return self.line()

    def line(self) -> str:
        ids = set(self.layers) | self.finished
        got = sum(c if k not in self.finished else t for k, (c, t) in self.layers.items())
        total = sum(t for _, t in self.layers.values())
        if not ids:
            return f"pulling {self.image}"
        size = f", {format_size(got)} of {format_size(total)}" if total else ""
        return f"pulling {self.image}: {len(self.finished)}/{len(ids)} layers{size}"

    def done(self) -> str:
        total = sum(t for _, t in self.layers.values())
        return (f"pulled {self.image} ({len(set(self.layers) | self.finished)} layers"
                + (f", {format_size(total)} fetched)" if total else ")"))


def _announce(api: Any, cid: str, enforcement: Enforcement, on_start: StartHook,
              stopping: threading.Event) -> None:
    pid = None
    with contextlib.suppress(Exception):  # telemetry must not stop the run
        pid = int(api.request("GET", f"/containers/{cid}/json")["State"]["Pid"])

    def stop(sig: int) -> None:  # a job's stop, a timeout, the growth watch's stop
        stopping.set()
        _quiet(lambda: api.request("POST", f"/containers/{cid}/kill",
                                   query={"signal": signal.Signals(sig).name}))

    on_start(Started(pid or None, enforcement, stop))


def _quiet(fn: Callable[[], Any]) -> None:
    with contextlib.suppress(Exception):  # best effort during teardown
        fn()


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def reader_gone(sock: Any, stream: int) -> None:
    """A reader of the relayed output went away (`| head -1`): the supervisor is told over
    its stdin, and closes the workload's pipe, whose next write meets SIGPIPE, as in a shell
    pipeline (the daemon would drop the rest, and the workload write on for ever)."""
    if sock is None:
        return
    with contextlib.suppress(OSError):
        sock.sendall(reader_words(stream))


def reader_words(stream: int) -> bytes:
    return f"closed {'stderr' if stream == 2 else 'stdout'}\n".encode()
