"""A job as a Kubernetes Indexed Job (batch/v1): completions = chunks, parallelism = the cap,
each pod's chunk from JOB_COMPLETION_INDEX (derived by the image's supervisor), one GPU as a
limit, memory from the measured peak, /dev/shm as an emptyDir of medium Memory, a per-index
backoff and a pod failure policy. Built as data and dumped by PyYAML (every value quoted by the
emitter)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

RESULTS = "/results"
ITEMS = "/etc/launcher/items"
OOM_EXIT = 137


@dataclass
class IndexedJob:
    name: str
    image: str
    command: list[str]
    items: int
    chunk_size: int
    chunks: int
    parallelism: int
    retries: int
    memory: int | None  # bytes: the chunk's limit (the measured peak)
    cpus: float | None
    gpu_resource: str | None  # nvidia.com/gpu, amd.com/gpu
    shm: int | None
    env: dict[str, str] = field(default_factory=dict)
    items_text: str | None = None  # a file's items, shipped in a ConfigMap
    workdir: str = "/workspace"
    tasks_per_chunk: int = 1


def k8s_name(text: str) -> str:
    """A DNS-1123 label from a job name."""
    name = re.sub(r"[^a-z0-9-]+", "-", f"launcher-{text}".lower()).strip("-")
    return name[:63].rstrip("-") or "launcher-job"


def render_indexed_job(j: IndexedJob) -> str:
    import yaml

    name = k8s_name(j.name)
    env = {**j.env, "LAUNCHER_JOB_ID": j.name, "LAUNCHER_ITEMS": str(j.items),
           "LAUNCHER_CHUNK_SIZE": str(j.chunk_size), "LAUNCHER_CHUNK_OUT_ROOT": RESULTS}
    limits: dict[str, Any] = {}
    requests: dict[str, Any] = {}
    if j.memory:
        limits["memory"] = requests["memory"] = str(j.memory)
    if j.cpus:
        limits["cpu"] = requests["cpu"] = f"{int(j.cpus * 1000)}m"
    if j.gpu_resource:
        limits[j.gpu_resource] = 1  # extended resources go in limits only
    mounts = [{"name": "results", "mountPath": RESULTS}]
    volumes: list[dict[str, Any]] = [{"name": "results", "emptyDir": {}}]
    if j.shm:
        mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
        volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory",
                                                     "sizeLimit": str(j.shm)}})
    docs: list[dict[str, Any]] = []
    if j.items_text is not None:
        env["LAUNCHER_ITEMS_FILE"] = f"{ITEMS}/items.txt"
        mounts.append({"name": "items", "mountPath": ITEMS, "readOnly": True})
        volumes.append({"name": "items", "configMap": {"name": f"{name}-items"}})
        docs.append({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": f"{name}-items"},
                     "data": {"items.txt": j.items_text}})
    container: dict[str, Any] = {
        "name": "chunk",
        "image": j.image,
        # the image's entrypoint is launcher's supervisor: the caps, then this chunk's command
        "args": list(j.command),
        "workingDir": j.workdir,
        "env": [{"name": k, "value": v} for k, v in sorted(env.items())],
        "resources": {"limits": limits, "requests": requests},
        "volumeMounts": mounts,
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/managed-by": "launcher"},
            "annotations": {
                "launcher/pids": (f"a pod has no pids limit of its own: the kubelet's "
                                  f"podPidsLimit bounds each chunk, which needs about "
                                  f"{j.tasks_per_chunk} tasks"),
            },
        },
        "spec": {
            "completionMode": "Indexed",
            "completions": j.chunks,
            "parallelism": j.parallelism,
            "backoffLimitPerIndex": j.retries,
            "maxFailedIndexes": j.chunks,
            "podFailurePolicy": {"rules": [
                # killed by its memory limit: the same work would be killed again; launcher
                # splits such a chunk in a `launcher jobs run`, a Job cannot
                {"action": "FailIndex", "onExitCodes": {
                    "containerName": "chunk", "operator": "In", "values": [OOM_EXIT]}},
                # drained or preempted nodes: not the chunk's fault, not counted
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
            ]},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/managed-by": "launcher"}},
                "spec": {"restartPolicy": "Never", "containers": [container],
                         "volumes": volumes},
            },
        },
    }
    docs.append(job)
    header = (f"# Rendered by launcher for job {json.dumps(j.name)}: {j.chunks} chunks of "
              f"{j.chunk_size} items, {j.parallelism} at once.\n"
              f"# Apply with `kubectl apply -f {name}.yaml`; a pod's pids limit is the "
              f"kubelet's podPidsLimit.\n")
    return header + yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False,
                                       width=100)
