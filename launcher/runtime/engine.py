"""The engine interface. Docker, Podman and native processes sit behind it (runtime/engines.py
is the registry); another engine is one module and one `launcher.engines` entry-point line, and
no caller changes: what an engine can do is a class attribute (`can_build`, `auto_rank`...)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from launcher.cgroups.advisory import parts
from launcher.errors import EngineError
from launcher.runtime.spec import RunSpec


@dataclass
class BuildEvent:
    kind: str  # step | output | error | done
    text: str


@dataclass
class Enforcement:
    """Which of the spec's limits the engine has the kernel enforce, and which it cannot."""

    enforced: dict[str, str] = field(default_factory=dict)  # cap -> how
    advisory: dict[str, str] = field(default_factory=dict)  # cap -> why not
    notes: list[str] = field(default_factory=list)  # limits carried or above an outer one
    cgroup: dict[str, Any] = field(default_factory=dict)  # where the run's cgroup went

    def sentence(self) -> str:
        parts = []
        if self.enforced:
            dirs = sorted({str(p["dir"]) for p in self.cgroup.get("placed", [])})
            parts.append("enforced by the kernel: " + ", ".join(
                f"{k} {v}" for k, v in self.enforced.items())
                + (f" in {', '.join(dirs)}" if dirs else ""))
        if self.advisory:
            parts.append("advisory only: " + ", ".join(
                f"{k} ({v})" for k, v in self.advisory.items()))
        parts += self.notes  # carried limits, a limit above an outer one
        return "; ".join(parts) or "no pids, memory or CPU limit asked for"

    def shortfall(self) -> str:
        """One sentence: each advisory limit and why, a fix they share said once."""
        items = [(cap, advisory, *parts(advisory)) for cap, advisory in self.advisory.items()]
        fixes = {fix for *_, fix in items}
        shared = fixes.pop() if len(fixes) == 1 and all(fix for *_, fix in items) else ""
        whys = [f"the {cap} limit ({why if shared else advisory})"
                for cap, advisory, why, _ in items]
        return (", ".join(whys) + f" cannot be enforced here{'; ' + shared if shared else ''}")

    def refusal(self, by: str = "--require-limits") -> str:
        """One line naming what asked for enforcement (the flag, or the profile's
        limits.require), each limit that cannot be enforced, and why."""
        return f"{by}: not started: {self.shortfall()}"


@dataclass
class Started:
    pid: int | None  # the host PID of the supervisor, when the engine knows it
    enforcement: Enforcement
    stop: Callable[[int], None] | None = None  # send a signal to the supervisor (timeouts)


@dataclass
class RunResult:
    status: int  # the workload's exit status (128 + N for a signal)
    enforcement: Enforcement


@dataclass(frozen=True)
class Leftover:
    """Something an earlier launcher left behind (it was killed before it could clean up)."""

    kind: str  # container | cgroup | ...
    ident: str
    detail: str
    idle: bool = False  # holds nothing (never started, empty): removed without asking


class ImageNotFound(EngineError):
    """The engine has no such image here (an explicit --image is then pulled)."""


OutputSink = Callable[[str, bytes], None]  # ("stdout" | "stderr", data)


class OutputClosed(Exception):  # noqa: N818 - a condition, not a failure
    """Raised by an OutputSink whose reader is gone (`launcher run ... | head`): the engine
    stops passing that stream on and, where it can, closes the workload's end, so the workload
    meets a closed pipe as it would in a shell pipeline."""
StartHook = Callable[[Started], None]


def passes_through(sink: OutputSink) -> bool:
    """A sink marked `passthrough` writes to this process's own stdout and stderr, and does
    nothing else: an engine may hand those to the workload's supervisor instead (a native
    run), which passes the output on itself."""
    return bool(getattr(sink, "passthrough", False))


class Engine(ABC):
    name: ClassVar[str] = "engine"
    python: ClassVar[str] = "python3"  # the interpreter that runs the built-in workloads
    inherits_environment: ClassVar[bool] = False  # the workload sees the caller's environment
    runs_host_processes: ClassVar[bool] = False  # a process of this machine, no image (chunks
    # on a Ray node, bench-memory's sizes)
    can_build: ClassVar[bool] = False  # builds and pushes images (`launcher build`)
    auto_rank: ClassVar[int | None] = None  # its turn in `--runtime auto` (None: never picked)

    def available(self) -> bool:
        try:
            self.ping()
            return True
        except EngineError:
            return False

    @abstractmethod
    def ping(self) -> None:
        """Raise EngineError with a helpful sentence when the engine does not answer."""

    @abstractmethod
    def image_exists(self, image: str | None) -> bool:
        """Whether `image` is there to run (engines that need no image: always)."""

    def build(self, context: Path, tag: str, labels: dict[str, str],
              on_event: Callable[[BuildEvent], None], no_cache: bool = False) -> str:
        """Build `context` as `tag`; stream events; return the image id."""
        raise EngineError(f"the {self.name} runtime builds no images; `launcher build` "
                          f"builds with the first engine that can")

    def push(self, image: str, on_event: Callable[[BuildEvent], None]) -> None:
        """Push `image` to its registry."""
        raise EngineError(f"the {self.name} runtime pushes no images; `launcher build` "
                          f"builds with the first engine that can")

    def pull(self, image: str, on_event: Callable[[BuildEvent], None]) -> None:
        """Fetch `image` from its registry, with progress events."""
        raise EngineError(f"the {self.name} runtime pulls no images; `launcher build` "
                          f"builds with the first engine that can")

    @abstractmethod
    def describe(self, spec: RunSpec) -> dict[str, Any]:
        """Exactly what `run` would send or start, for a dry run."""

    def preview(self, spec: RunSpec) -> Enforcement:
        """Before anything starts: which of the spec's limits `run` could not have the kernel
        enforce here, and why (the default: an engine that enforces all or fails)."""
        return Enforcement()

    def leftovers(self) -> list[Leftover]:
        """What earlier runs of this engine left behind on this host (their launcher died)."""
        return []

    def remove(self, leftover: Leftover) -> None:  # noqa: B027 - engines with no leftovers
        """Stop and remove one leftover."""

    @abstractmethod
    def run(self, spec: RunSpec, on_output: OutputSink,
            on_start: StartHook | None = None) -> RunResult:
        """Start the workload under the spec's limits, stream its output through `on_output`;
        on Ctrl-C or SIGTERM stop it and clean up (when called from the main thread; from
        another thread the caller stops it through `Started.stop`). Leave nothing behind."""


def forward_signals(handler: Callable[[int, object], None]) -> dict[int, Any]:
    """Install `handler` for the signals a container's run relays (SIGINT, SIGTERM, SIGHUP,
    SIGQUIT, SIGUSR1, SIGUSR2: launcher lives on to write the record) when on the main
    thread (Python allows no other); return what to restore."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}
    return {s: signal.signal(s, handler) for s in STOPS + RELAYED_ONLY}


def _signals(*names: str) -> tuple[int, ...]:
    import signal

    return tuple(getattr(signal, n) for n in names)


STOPS = _signals("SIGINT", "SIGTERM", "SIGQUIT", "SIGHUP")  # a second one kills the container
RELAYED_ONLY = _signals("SIGUSR1", "SIGUSR2")


def restore_signals(old: dict[int, Any]) -> None:
    import signal

    for s, h in old.items():
        signal.signal(s, h)
