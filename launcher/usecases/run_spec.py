"""What a run starts from: its id and folder, the folders it mounts, where it works, as whom,
and what asks for its limits to be enforced."""

from __future__ import annotations

import os
import time
from pathlib import Path

from launcher.caps.resolve import Resolved
from launcher.errors import LauncherError
from launcher.runtime.spec import Mount, RunSpec
from launcher.usecases.run_request import RunRequest


def runs_dir() -> Path:
    return Path(os.environ.get("LAUNCHER_RUNS_DIR") or "runs")


def choose_run_id(req: RunRequest, what: str) -> str:
    if req.resume:
        if not (runs_dir() / req.resume).is_dir():
            raise LauncherError(f"--resume {req.resume}: no such run in {runs_dir()}/")
        return req.resume
    if req.name:
        return req.name
    slug = "".join(c if c.isalnum() or c in "-_" else "-" for c in Path(what).name)[:24]
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{slug or 'run'}-{os.urandom(2).hex()}"


def caller() -> str:
    """Files the workload writes into mounted folders belong to the calling user."""
    return f"{os.getuid()}:{os.getgid()}"


def mounts_of(req: RunRequest) -> list[Mount]:
    mounts = []
    cwd = os.getcwd()
    if req.mount_cwd and cwd != "/":
        mounts.append(Mount(cwd, cwd))
    for v in req.volumes:
        m = Mount.parse(v)
        src = os.path.abspath(os.path.expanduser(m.source))
        if not os.path.exists(src):
            raise LauncherError(f"--volume {v}: no such file or folder {src!r}")
        if not m.target.startswith("/"):
            raise LauncherError(f"--volume {v}: the target must be an absolute path")
        mounts.append(Mount(src, m.target, m.read_only))
    return mounts


def workdir_of(req: RunRequest) -> str | None:
    if req.workdir:
        if not req.workdir.startswith("/"):
            raise LauncherError(f"--workdir must be an absolute path (got {req.workdir!r})")
        return req.workdir
    cwd = os.getcwd()
    return cwd if req.mount_cwd and cwd != "/" else None


def workload_paths(spec: RunSpec, run_dir: Path) -> None:
    """Built-in workloads import launcher and write into the run folder: the runs folder is
    mounted at its own path, so paths read the same inside and out."""
    runs = str(runs_dir().resolve())
    spec.imports_launcher = True
    if not any(m.source == runs for m in spec.mounts):
        spec.mounts.append(Mount(runs, runs))
    spec.env["LAUNCHER_RUNS_DIR"] = runs
    spec.env["LAUNCHER_RUN_DIR"] = str(run_dir.resolve())


def who_requires_limits(req: RunRequest, r: Resolved) -> str | None:
    if req.require_limits:
        return "--require-limits"
    if r.profile.get("limits.require"):
        return f"limits.require ({r.profile.where('limits.require')})"
    return None

