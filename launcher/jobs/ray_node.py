"""`launcher jobs ray-node`: the `ray start` command that declares this node's GPUs, memory and
cap (the `launcher_slot` resource each chunk takes one unit of), from its profile. The Ray
backend's own sub-command (entry-point group `launcher.commands`, as `jobs.ray-node`)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from launcher.commands import Command, Said
from launcher.flags import GPUS, HOST_ROOT, PROFILE, Flag, flag


@dataclass(frozen=True, kw_only=True)
class RayNodeRequest:
    profile: str = flag(PROFILE, "auto")
    address: str | None = flag(Flag(("--address",), "The head's HOST:PORT (none: start a "
                                                     "head)."))
    gpus: str | None = flag(GPUS)
    host_root: Path | None = flag(HOST_ROOT)


def ray_node(req: RayNodeRequest) -> Said:
    from launcher.caps.load import load_and_resolve
    from launcher.jobs.job import Prepared
    from launcher.jobs.plan import plan_job
    from launcher.jobs.ray_backend import node_command
    from launcher.jobs.spec import JobSpec

    r = load_and_resolve(req.profile, host_root=req.host_root, processes=1, gpus=req.gpus,
                         clamp=True, gpus_per_process=1)  # each chunk sees its own GPU
    node = JobSpec(path=Path("ray-node"), name="ray-node", command=["true"], items=1)
    p = Prepared(node, r, plan_job(node, r))
    command = node_command(p, req.address)
    cap, binding = p.plan.concurrency, p.plan.binding
    return Said(lines=[shlex.join(command)], notes=[f"cap {cap} chunks on this node ({binding})"],
                data={"command": command, "cap": cap, "binding": binding})


COMMAND = Command(help="Print the `ray start` command that declares this node's GPUs, memory "
                       "and cap (the `launcher_slot` resource each chunk takes one unit of) "
                       "from its profile.", request=RayNodeRequest, run=ray_node)
