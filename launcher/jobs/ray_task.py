"""What a Ray worker runs for a chunk, kept in a module of its own with few imports: every
worker process of every job imports it (tens of them start on a node)."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

_RESOLVED: dict[str, Any] = {}  # a Ray worker runs many chunks: resolve once per job


def run_chunk(payload: dict[str, Any]) -> dict[str, Any]:
    """On a node: the caps resolved here, the chunk under the supervisor, its outcome."""
    import json

    import ray

    from launcher.caps.resolve import resolve_recipe
    from launcher.jobs.execute import LocalExecutor
    from launcher.jobs.ledger import Chunk
    from launcher.jobs.spec import JobSpec
    from launcher.probe import probe_host
    from launcher.runtime.engines import first_that

    key = json.dumps([payload["recipe"], payload["overrides"]], sort_keys=True)
    if key not in _RESOLVED:
        facts = probe_host("/")
        _RESOLVED[key] = resolve_recipe(payload["recipe"], facts, payload["overrides"],
                                        facts.env)
    r = _RESOLVED[key]
    fields = payload["spec"]
    spec = JobSpec(**{**fields, **{k: Path(fields[k]) for k in ("path", "items_file", "output")
                                   if fields[k] is not None}})
    ids = ray.get_gpu_ids()
    gpu = int(ids[0]) if ids and payload["gpus"] else None
    ex = LocalExecutor(spec, r, engine=first_that("runs_host_processes"),
                       folder=Path(payload["folder"]), image=None, cwd=Path(payload["cwd"]),
                       items=_window(payload), memory_limit=payload["memory"])
    ex.extra_env = {"LAUNCHER_NODE": ray.get_runtime_context().get_node_id()}
    o = ex.execute(Chunk(**payload["chunk"]), gpu, threading.Event())
    return dataclasses.asdict(o)


def _window(payload: dict[str, Any]) -> list[str] | None:
    """The chunk's items at their places (the driver sends only those)."""
    lines = payload["items"]
    if lines is None:
        return None
    return [""] * payload["chunk"]["start"] + lines
