"""What a Slurm job runs for one chunk (`python -m launcher.jobs.slurm_task PAYLOAD OUTCOME`):
the caps resolved on the node, against the job's own cgroup (Slurm's `task/cgroup` holds its
memory limit and its CPUs), the chunk under launcher's supervisor, its outcome written as JSON
for the driver. Few imports: a node starts one per chunk."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
from pathlib import Path


def main(payload_path: str, outcome_path: str) -> None:
    from launcher.caps.resolve import resolve_recipe
    from launcher.jobs.execute import LocalExecutor
    from launcher.jobs.ledger import Chunk
    from launcher.jobs.spec import JobSpec
    from launcher.probe import probe_host
    from launcher.runtime.engines import first_that, get_engine

    payload = json.loads(Path(payload_path).read_text())
    facts = probe_host("/")
    r = resolve_recipe(payload["recipe"], facts, payload["overrides"], facts.env)
    fields = payload["spec"]
    spec = JobSpec(**{**fields, **{k: Path(fields[k]) for k in ("path", "items_file", "output")
                                   if fields[k] is not None}})
    engine = (get_engine(payload["engine"]) if payload.get("engine")  # the one it loads
              else first_that("runs_host_processes"))
    ex = LocalExecutor(spec, r, engine=engine,
                       folder=Path(payload["folder"]), image=None, cwd=Path(payload["cwd"]),
                       items=_window(payload))
    ex.memory_limit = None  # Slurm's job memory limit is the chunk's (--mem)
    ex.extra_env = {"LAUNCHER_SLURM_JOB": os.environ.get("SLURM_JOB_ID", "")}
    gpu = 0 if payload["gpus"] else None
    o = ex.execute(Chunk(**payload["chunk"]), gpu, threading.Event())
    tmp = Path(f"{outcome_path}.tmp")
    tmp.write_text(json.dumps(dataclasses.asdict(o)))
    os.replace(tmp, outcome_path)  # whole, or not there


def _window(payload: dict) -> list[str] | None:  # type: ignore[type-arg]
    lines = payload["items"]
    if lines is None:
        return None
    return [""] * payload["chunk"]["start"] + lines


if __name__ == "__main__":  # a failure before the outcome: its traceback in the job's log
    main(sys.argv[1], sys.argv[2])
