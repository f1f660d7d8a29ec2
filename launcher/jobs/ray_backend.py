"""The Ray backend: the same job, ledger, pull queue and OOM split, with each chunk a Ray task
that runs on whichever node has a free slot (an existing engine; no home-made coordinator).

Each node declares its own cap as a custom resource (`launcher_slot`; `launcher jobs ray-node`
prints the `ray start` command from the node's profile), and each chunk takes one unit of it,
so no node ever runs more than its cap. A task asks for `num_gpus` 1 (0 on the CPU), `memory`
the measured peak (Ray schedules on it; launcher's cgroup enforces it) and `num_cpus` from the
caps. On its node the chunk runs under launcher's supervisor with the caps resolved there,
against that node's cgroup: the supervisor sets every managed variable for the workload (Ray
itself sets only OMP_NUM_THREADS, ray#36936), so the task carries no `runtime_env`, which
would make Ray start workers of their own for it (~3 s of a 99-chunk job's first wave here).
Ray never retries a chunk (`max_retries=0`): an OOM-killed chunk is split by launcher, not
rerun with the same work (ray#45257, ray#41857).
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

from launcher.errors import LauncherError
from launcher.flags import Flag
from launcher.jobs.execute import Outcome
from launcher.jobs.job import Prepared
from launcher.jobs.ledger import Chunk
from launcher.jobs.runner import Slot
from launcher.runtime.engines import get_engine

SLOT = "launcher_slot"  # the custom resource each node declares: its cap


class RayExecutor:
    def __init__(self, p: Prepared, folder: Path, items: list[str] | None,
                 remote: Any) -> None:
        self.p, self.folder, self.items, self.remote = p, folder, items, remote
        self.refs: dict[int, Any] = {}
        self.lock = threading.Lock()
        r = p.resolved
        self.gpus = 1 if p.plan.gpus[0] is not None else 0
        self.options = {
            "num_gpus": self.gpus,
            "num_cpus": max(1, r.caps.threads["omp"]),
            "resources": {SLOT: 1},
            "max_retries": 0,  # launcher retries, and splits what the OOM killer took
        }
        if p.plan.peak_bytes:
            self.options["memory"] = int(p.plan.peak_bytes)
        spec = p.spec.to_json()
        self.base = {"recipe": r.recipe(), "overrides": r.overrides, "spec": spec,
                     "folder": str(folder), "cwd": str(p.spec.path.resolve().parent),
                     "gpus": self.gpus, "memory": p.plan.peak_bytes}

    def execute(self, chunk: Chunk, gpu: int | None, stopping: threading.Event) -> Outcome:
        import ray

        payload = {**self.base, "chunk": dataclasses.asdict(chunk),  # its own items only
                   "items": self.items[chunk.start:chunk.end] if self.items else None}
        ref = self.remote.options(**self.options).remote(payload)
        with self.lock:
            self.refs[chunk.id] = ref
        try:
            while True:
                done, _ = ray.wait([ref], timeout=0.5)
                if done:
                    break
                if stopping.is_set():
                    ray.cancel(ref, force=True)
                    return Outcome(143, "stopped with the job", interrupted=True)
            try:
                return Outcome(**ray.get(ref))
            except ray.exceptions.RayError as exc:
                text = str(exc).strip().splitlines()
                return Outcome(1, f"the Ray task failed: {text[0] if text else exc}")
        finally:
            with self.lock:
                self.refs.pop(chunk.id, None)

    def stop_all(self, sig: int = 15) -> None:
        import ray

        with self.lock:
            refs = list(self.refs.values())
        for ref in refs:
            ray.cancel(ref, force=True)


class RayBackend:
    name = "ray"
    on_this_host = False  # chunks run on the cluster's nodes
    flags = {"address": Flag(("--address",), "Ray cluster address, HOST:PORT (--backend ray).",
                             envvar="RAY_ADDRESS")}

    def __init__(self, p: Prepared, folder: Path, items: list[str] | None,
                 options: dict[str, Any]) -> None:
        runtime = options.get("runtime")
        if runtime is not None and not get_engine(runtime).runs_host_processes:
            raise LauncherError(f"--backend ray runs each chunk natively on its node under "
                                f"launcher's supervisor; --runtime {runtime} is for --backend "
                                f"local")
        try:
            import ray
        except ImportError:
            raise LauncherError("--backend ray needs Ray: pip install 'launcher[ray]'") from None
        address = options.get("address")
        if not address:
            raise LauncherError("--backend ray needs a cluster: --address HOST:PORT (or "
                                "RAY_ADDRESS); start nodes with `launcher jobs ray-node`")
        import logging

        try:
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise LauncherError(f"cannot reach the Ray cluster at {address}: {exc}") from None
        total = int(ray.cluster_resources().get(SLOT, 0))
        if total < 1:
            ray.shutdown()
            raise LauncherError(f"the Ray cluster at {address} declares no {SLOT} resource: "
                                f"start its nodes with the command `launcher jobs ray-node "
                                f"--profile P` prints")
        self.total = total
        from launcher.jobs.ray_task import run_chunk

        remote = ray.remote(run_chunk)
        self._executor = RayExecutor(p, folder, items, remote)

    def slots(self) -> list[Slot]:
        return [Slot(f"ray{i}", None) for i in range(self.total)]

    def executor(self) -> RayExecutor:
        return self._executor

    def concurrency_note(self) -> str:
        return (f"Ray: {self.total} slots over the cluster's nodes (each node its own cap, "
                f"the `{SLOT}` resource)")

    def close(self) -> None:
        import ray

        ray.shutdown()


def node_command(p: Prepared, head: str | None) -> list[str]:
    """`ray start` for a node whose profile is `p`'s: its GPUs, memory and cap."""
    import json

    plan = p.plan
    gpus = len([g for g in plan.gpus if g is not None]) if plan.gpus[0] is not None else 0
    gpu_total = p.resolved.selection.count
    task_cpus = max(1, p.resolved.caps.threads["omp"])
    cmd = ["ray", "start", f"--address={head}" if head else "--head",
           f"--num-cpus={max(p.resolved.facts.effective_cpus, plan.concurrency * task_cpus)}",
           f"--num-gpus={gpu_total if gpus else 0}",
           f"--resources={json.dumps({SLOT: plan.concurrency}, separators=(',', ':'))}"]
    if plan.usable_bytes:
        cmd.append(f"--memory={plan.usable_bytes}")
    return cmd
