"""The native runtime: the workload as a child process of this machine, for laptops and pods
with no Docker. Same supervisor, same signals, exit status and diagnosis as a container."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from launcher.errors import EngineError
from launcher.runtime.engine import Engine, OutputSink, StartHook
from launcher.runtime.run_cgroup import RunCgroup, make_run_cgroup

ENTRY = Path(__file__).resolve().parents[1] / "supervise" / "entrypoint.py"
_RLIMIT = {"nproc": resource.RLIMIT_NPROC, "nofile": resource.RLIMIT_NOFILE,
           "stack": resource.RLIMIT_STACK, "memlock": resource.RLIMIT_MEMLOCK}


def _rlimits(ulimits: list[dict[str, Any]]) -> list[tuple[int, int, int]]:
    """(resource, soft, hard) within this process's hard limits (an unprivileged process
    cannot raise them)."""
    out = []
    for u in ulimits:
        res = _RLIMIT.get(u["Name"])
        if res is None:
            continue
        _, cur_hard = resource.getrlimit(res)
        inf = resource.RLIM_INFINITY

        def fit(v: int, cur_hard: int = cur_hard, inf: int = inf) -> int:
            v = inf if v < 0 else v
            return v if cur_hard == inf or (v != inf and v <= cur_hard) else cur_hard

        hard = fit(u["Hard"])
        soft = min(fit(u["Soft"]), hard) if hard != inf else fit(u["Soft"])
        out.append((res, soft, hard))
    return out


class NativeEngine(Engine):
    name = "native"

    def __init__(self, cgroup_root: Path | None = None) -> None:
        self.cgroup_root = cgroup_root or Path(os.environ.get("LAUNCHER_CGROUP_ROOT", "/"))
        self.notes: dict[str, Any] = {}

    def ping(self) -> None:
        return None

    def build(self, context, tag, labels, on_event):  # type: ignore[no-untyped-def]
        raise EngineError("the native runtime builds no images; use --runtime docker")

    def run(self, spec: dict[str, Any], on_output: OutputSink,
            on_start: StartHook | None = None) -> int:
        cpus = spec.get("nano_cpus")
        rc: RunCgroup = make_run_cgroup(
            f"launcher-{spec.get('name') or uuid.uuid4().hex[:12]}", spec.get("pids_limit"),
            spec.get("mem_limit"), cpus / 1e9 if cpus else None, self.cgroup_root)
        self.notes = {"enforced": rc.enforced, "advisory": rc.advisory}
        print(f"launcher: native run; {rc.sentence()}", file=sys.stderr, flush=True)
        limits = _rlimits(spec.get("ulimits", []))

        def before_exec() -> None:  # in the child: rlimits, then join the run's cgroups
            for res, soft, hard in limits:
                resource.setrlimit(res, (soft, hard))
            rc.join(os.getpid())

        env = {**os.environ, **spec.get("environment", {})}
        cmd = [sys.executable, "-I", "-S", str(ENTRY), *spec["command"]]
        try:
            child = subprocess.Popen(cmd, env=env, preexec_fn=before_exec)
        except (OSError, subprocess.SubprocessError) as exc:
            rc.cleanup()
            raise EngineError(f"cannot start the workload: {exc}") from None

        def forward(signum: int, _frame: object) -> None:
            child.send_signal(signum)

        old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            if on_start is not None:
                on_start(child.pid)
            code = child.wait()
        finally:
            for s, h in old.items():
                signal.signal(s, h)
            if child.poll() is None:
                child.kill()
                child.wait()
            rc.cleanup()
        return 128 - code if code < 0 else code
