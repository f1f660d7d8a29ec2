"""A made-up render target ("slurm": a job array script), registered as any target is: this
module and one entry-point line. One array task per chunk, each capped at the chunk's measured
memory, the job's command run through launcher's chunk contract."""

from __future__ import annotations

import shlex

from launcher import contract as c
from launcher.render.targets import JobRenderOptions, PreparedJob, RenderedJob


class SlurmTarget:
    name = "slurm"
    description = "a Slurm job array, one task per chunk"

    def check(self, options: JobRenderOptions) -> None:
        return None  # it runs the job's command on the cluster's own nodes: no image needed

    def render(self, job: PreparedJob, options: JobRenderOptions) -> RenderedJob:
        spec, plan = job.spec, job.plan
        memory = job.resolved.profile.get("workers.memory")
        lines = ["#!/bin/bash", f"#SBATCH --job-name={spec.name}",
                 f"#SBATCH --array=0-{len(plan.chunks) - 1}%{plan.job_concurrency}"]
        if memory:
            lines.append(f"#SBATCH --mem={memory // 2**20}M")
        lines += [f"export {c.JOB_ID}={shlex.quote(spec.name)} {c.ITEMS}={spec.items} "
                  f"{c.CHUNK_SIZE}={plan.chunk_size}",
                  f"export {c.CHUNK_INDEX}=$SLURM_ARRAY_TASK_ID",
                  shlex.join(spec.command)]
        name = f"{spec.name}.sbatch"
        return RenderedJob(files={name: "\n".join(lines) + "\n"},
                           lines=[f"wrote {name}: `sbatch {name}`"],
                           data={"chunks": len(plan.chunks)})


TARGET = SlurmTarget()
