"""A job from spec to summary: the profile resolved once, the plan, the ledger in the job's
folder (locked for this launcher's life), the orphans of a killed run recovered, the pull queue
over an executor (this machine's engine, or Ray), and the summary."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.caps.load import load_and_resolve
from launcher.caps.resolve import Resolved
from launcher.contract import read_exit
from launcher.errors import LauncherError, Refused
from launcher.jobs.execute import chunk_dir
from launcher.jobs.ledger import Chunk, JobMismatch, Ledger
from launcher.jobs.plan import JobPlan, plan_job
from launcher.jobs.spec import JobSpec, load_job
from launcher.supervise import commit


@dataclass
class Prepared:
    spec: JobSpec
    resolved: Resolved
    plan: JobPlan


def prepare(spec_path: Path, *, profile: str | None = None, framework: str | None = None,
            max_concurrent: int | None = None, env: dict[str, str] | None = None,
            host_root: Path | None = None, inherit_shell: bool = True,
            gpus: str | None = None, running: bool = False,
            on_this_host: bool = True) -> Prepared:
    """The spec, its profile resolved once for one chunk, and the plan. `running`: GPUs this
    host lacks refuse (a plan only warns). `on_this_host` False: the chunks run elsewhere (Ray
    nodes, a Kubernetes cluster), so the GPUs are the profile's, not this host's."""
    spec = load_job(spec_path)
    r = load_and_resolve(profile or spec.profile, host_root=host_root,
                         inherit_shell=inherit_shell, framework=framework or spec.framework,
                         processes=1, overrides=env, gpus=gpus, for_this_host=on_this_host,
                         clamp=True, gpus_per_process=1)  # each chunk sees its own GPU
    if running and r.selection.shortfall:
        raise LauncherError(r.selection.shortfall)
    if r.caps.verdict.level == "refuse":
        raise Refused("refused: " + " ".join(r.caps.verdict.reasons))
    return Prepared(spec, r, plan_job(spec, r, max_concurrent))


def read_items(spec: JobSpec) -> list[str] | None:
    if spec.items_file is None:
        return None
    with spec.items_file.open() as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def open_ledger(p: Prepared) -> tuple[Ledger, list[str]]:
    """The job's ledger, made or checked, with the chunks a killed run left recovered."""
    folder = p.spec.folder()
    ledger = Ledger(folder / "ledger.sqlite")
    info = {"name": p.spec.name, "spec": str(p.spec.path), "items": p.spec.items,
            "chunk_size": p.plan.chunk_size, "profile": p.resolved.profile.name}
    try:
        ledger.init(p.spec.identity(), info, p.plan.chunks)
    except JobMismatch:
        ledger.close()
        raise LauncherError(f"{folder} holds another job (a different command or items); use "
                            f"another output folder, or remove it to start over") from None
    # This launcher holds the job's lock: a chunk still marked running was left by one that died.
    notes = ledger.requeue_orphans(lambda _runner: False, lambda c: finished(folder, c))
    return ledger, notes


def finished(folder: Path, c: Chunk) -> dict[str, Any] | None:
    """How an orphaned chunk ended, from its exit file; one that succeeded has its output
    committed now if its launcher died before the rename (None, run it again, when its output
    is not there)."""
    cdir = chunk_dir(folder, c.id)
    ended = read_exit(cdir / "exit.json")
    if ended is None or ended.get("status") != 0:
        return ended
    try:
        if commit.recover(str(cdir), {"chunk": c.id, "items": [c.start, c.end],
                                      "recovered": True}):
            return ended
    except OSError:
        pass
    return None


class GpuSampler(threading.Thread):
    """Utilisation of each GPU, once a second, for the summary (only where GPUs show)."""

    def __init__(self) -> None:
        super().__init__(daemon=True, name="launcher-gpu-watch")
        from launcher.telemetry.gpus import GpuSampler

        self.sampler = GpuSampler()
        self.samples: dict[int, list[float]] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(1.0):
            for row in self.sampler.sample():
                self.samples.setdefault(row["gpu"], []).append(row["util_percent"])

    def means(self) -> dict[int, float]:
        return {g: sum(v) / len(v) for g, v in sorted(self.samples.items()) if v}


def write_summary(folder: Path, summary: dict[str, Any]) -> None:
    from launcher.contract import write_json

    write_json(folder / "summary.json", summary)
