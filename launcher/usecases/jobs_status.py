"""`launcher jobs status`: a job's chunks from its ledger, who runs it now (its lock's holder),
and how to go on."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.errors import LauncherError
from launcher.flags import Flag, flag
from launcher.jobs.summary import lines as summary_lines
from launcher.jobs.summary import run_line

__all__ = ["JobsStatusRequest", "JobsStatusResult", "run_line", "status", "summary_lines"]


@dataclass(frozen=True, kw_only=True)
class JobsStatusRequest:
    target: Path = flag(Flag((), "The job's folder, or its spec.", kind="path",
                             metavar="TARGET"), dataclasses.MISSING)


@dataclass(frozen=True, kw_only=True)
class JobsStatusResult:
    data: dict[str, Any]  # --json: the summary, what runs now, what was interrupted, ...
    info: dict[str, Any]  # the job as its ledger records it (name, spec, items)
    holder: str | None  # who holds the job's lock now


def status(req: JobsStatusRequest) -> JobsStatusResult:
    from launcher.jobs import summary as summ
    from launcher.jobs.ledger import Ledger

    folder = _job_folder(req.target)
    ledger = Ledger(folder / "ledger.sqlite")
    meta = ledger.meta()
    info = json.loads(meta.get("info", "{}"))
    running = ledger.chunks("running")
    s = summ.summarize(ledger, max(1, len(running)))
    ledger.close()
    last = _summary_file(folder)
    holder = _lock_holder(folder)
    now = [{"chunk": c.id, "items": [c.start, c.end], "slot": c.slot, "gpu": c.gpu,
            "for_s": round(time.time() - (c.started or time.time()), 1)} for c in running]
    if holder is None:  # marked running by a launcher that is gone: nothing runs them
        s["counts"] = {**s["counts"], "running": 0, "interrupted": len(running)}
    c = s["counts"]
    data = {**s, "job": info.get("name"), "folder": str(folder),
            "running_now": now if holder else [], "interrupted": [] if holder else [
                {k: v for k, v in r.items() if k != "for_s"} for r in now],
            "runner": holder, "last_run": last,
            "finished": not holder and not c["pending"] and not c["running"]
            and not c.get("interrupted"),
            "rerun": meta.get("rerun") or shlex.join(["launcher", "jobs", "run",
                                                      str(info.get("spec", "SPEC"))])}
    backend = meta.get("backend") or _backend_of(meta.get("rerun"))
    data["backend"] = backend
    if backend is not None:  # what the backend's scheduler says (Slurm: each chunk's job)
        from launcher.jobs.backends import external_state

        data["external"] = external_state(backend, folder, str(info.get("name")),
                                          holder is not None)
    return JobsStatusResult(data=data, info=info, holder=holder)


def _backend_of(rerun: str | None) -> str | None:
    """The backend a ledger written before it recorded one ran on: its rerun's --backend."""
    if not rerun:
        return None
    argv = shlex.split(rerun)
    return argv[argv.index("--backend") + 1] if "--backend" in argv[:-1] else "local"


def _job_folder(target: Path) -> Path:
    """The job's folder: the one given, or the spec's (beside it, wherever this runs)."""
    if not target.is_file():
        if not (target / "ledger.sqlite").is_file():
            raise LauncherError(f"{target}: no job ledger here (ledger.sqlite); give a job "
                                f"folder or the job's spec")
        return target
    from launcher.jobs.spec import load_job

    spec = load_job(target)
    folder = spec.folder()
    if not (folder / "ledger.sqlite").is_file():
        raise LauncherError(f"{target}: job {spec.name} has not run yet (no ledger in "
                            f"{folder}): `launcher jobs run {shlex.quote(str(target))}`")
    return folder


def _summary_file(folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads((folder / "summary.json").read_text())  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return None


def _lock_holder(folder: Path) -> str | None:
    """Who holds the job's lock now, if anyone."""
    import fcntl

    path = folder / ".lock"
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    except BlockingIOError:
        return os.read(fd, 200).decode(errors="replace").strip() or "another launcher"
    finally:
        os.close(fd)
