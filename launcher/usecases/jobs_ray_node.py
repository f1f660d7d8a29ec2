"""`launcher jobs ray-node`: the `ray start` command that declares this node's GPUs, memory
and cap, from its profile."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, kw_only=True)
class RayNodeRequest:
    profile: str = "auto"
    address: str | None = None  # the head's HOST:PORT (None: start a head)
    gpus: str | None = None
    host_root: Path | None = None


@dataclass(frozen=True, kw_only=True)
class RayNodeResult:
    command: list[str]
    cap: int  # chunks at once on this node
    binding: str  # which bound sets the cap


def ray_node(req: RayNodeRequest) -> RayNodeResult:
    from launcher.caps.load import load_and_resolve
    from launcher.jobs.job import Prepared
    from launcher.jobs.plan import plan_job
    from launcher.jobs.ray_backend import node_command
    from launcher.jobs.spec import JobSpec

    r = load_and_resolve(req.profile, host_root=req.host_root, processes=1, gpus=req.gpus,
                         clamp=True, gpus_per_process=1)  # each chunk sees its own GPU
    node = JobSpec(path=Path("ray-node"), name="ray-node", command=["true"], items=1)
    p = Prepared(node, r, plan_job(node, r))
    return RayNodeResult(command=node_command(p, req.address), cap=p.plan.concurrency,
                         binding=p.plan.binding)
