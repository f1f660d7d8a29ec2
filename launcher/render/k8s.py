"""A job as a Kubernetes Indexed Job (batch/v1): completions = chunks, parallelism = the job's
cap (the spec's nodes x each node's cap, at most the chunks), each pod's chunk from
JOB_COMPLETION_INDEX (derived by the image's supervisor, which commits the chunk's output on
the results claim), one GPU as a limit, memory from the measured peak, /dev/shm as an emptyDir
of medium Memory, a per-index backoff and a pod failure policy; the results on a
PersistentVolumeClaim (written here, or an existing one); and the Dockerfile that puts the
job's own folder (less runs, its output and the render's) into the image the pods pull. Built
as data and dumped by PyYAML (every value quoted by the emitter).

Valid for Kubernetes 1.28 to 1.37 (checked with kubernetes-validate --strict for each); it runs
as written from 1.29 (backoffLimitPerIndex on by default; 1.28 needs the
JobBackoffLimitPerIndex feature gate)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from launcher.contract import ITEMS_DIR as ITEMS
from launcher.render.yamltext import yaml_dumper

RESULTS = "/results"
MIN_VERSION = "1.29"
_REF = re.compile(r"^[a-z0-9][a-z0-9._-]*(:[0-9]+)?(/[a-z0-9][a-z0-9._-]*)+"
                  r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$")
_ANY_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$")
_WORKDIR = re.compile(r"^/[A-Za-z0-9._/-]*$")
OOM_EXIT = 137


@dataclass
class IndexedJob:
    name: str
    image: str
    command: list[str]
    items: int
    chunk_size: int
    chunks: int
    parallelism: int  # the job's: every node's chunks at once, not one node's
    retries: int
    memory: int | None  # bytes: the chunk's limit (the measured peak)
    cpus: float | None
    gpu_resource: str | None  # nvidia.com/gpu, amd.com/gpu
    shm: int | None
    env: dict[str, str] = field(default_factory=dict)
    items_text: str | None = None  # a file's items, shipped in a ConfigMap
    workdir: str = "/workspace"
    tasks_per_chunk: int = 1
    claim: str | None = None  # an existing PersistentVolumeClaim; None: written here
    claim_size: str = "10Gi"  # the claim written here


def pushed(image: str) -> bool:
    """A reference a cluster's nodes can pull: it names its registry (a host with a dot or a
    port, or localhost), as in registry.example.com/team/job:1 or docker.io/me/job:1."""
    first, sep, _ = image.partition("/")
    return bool(sep and _REF.match(image)) and ("." in first or ":" in first
                                                 or first == "localhost")


def check_image(image: str, what: str = "--image") -> None:
    from launcher.errors import LauncherError

    if not pushed(image):
        raise LauncherError(
            f"{what}: {image!r} is not a pushed reference (REGISTRY/NAME:TAG, e.g. "
            f"docker.io/you/job:1): the cluster's nodes pull it; build and push one with "
            f"`launcher build --push --image REGISTRY/NAME:TAG`")


def claim_name(job: IndexedJob) -> str:
    return job.claim or f"{k8s_name(job.name)}-results"


def render_dockerfile(job: str, base: str, workdir: str, command: str) -> str:
    """The image the pods pull: launcher's image (its supervisor the entrypoint) with the
    job's folder (the build context) in `workdir`."""
    from launcher.errors import LauncherError

    if not _ANY_REF.match(base):
        raise LauncherError(f"--base-image: not an image reference (got {base!r})")
    if not _WORKDIR.match(workdir):
        raise LauncherError(f"--workdir: an absolute path of letters, digits, '.', '_', '-' "
                            f"and '/' (got {workdir!r})")
    command = "".join(c if c.isprintable() else "?" for c in command)  # one comment line
    return (f"# The image of job {json.dumps(job)}: launcher's image (its supervisor applies "
            f"the caps) with the\n# job's own folder in {workdir}, where each pod runs its "
            f"chunk. Build and push it:\n#   {command}\n"
            f"FROM {base}\n"
            f"COPY {json.dumps(['./', workdir.rstrip('/') + '/'])}\n")


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
    volumes: list[dict[str, Any]] = [{"name": "results", "persistentVolumeClaim": {
        "claimName": claim_name(j)}}]
    if j.shm:
        mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
        volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory",
                                                     "sizeLimit": str(j.shm)}})
    docs: list[dict[str, Any]] = []
    if j.claim is None:  # every pod, on any node, writes its chunk there: ReadWriteMany
        docs.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                     "metadata": {"name": claim_name(j),
                                  "labels": {"app.kubernetes.io/managed-by": "launcher"}},
                     "spec": {"accessModes": ["ReadWriteMany"],
                              "resources": {"requests": {"storage": j.claim_size}}}})
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
            "parallelism": min(j.parallelism, j.chunks),
            "backoffLimitPerIndex": j.retries,
            "maxFailedIndexes": j.chunks,
            "podFailurePolicy": {"rules": [
                # killed by its memory limit: the same work would be killed again; launcher
                # splits such a chunk in a `launcher jobs run`, a Job cannot
                # (onPodConditions empty and status given: required by the 1.28-1.34 schemas)
                {"action": "FailIndex", "onExitCodes": {
                    "containerName": "chunk", "operator": "In", "values": [OOM_EXIT]},
                 "onPodConditions": []},
                # drained or preempted nodes: not the chunk's fault, not counted
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget",
                                                          "status": "True"}]},
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
              f"{j.chunk_size} items, {j.parallelism} at once; Kubernetes {MIN_VERSION} or "
              f"later.\n# Results: INDEX/out on the claim {claim_name(j)} (committed by each "
              f"pod when its chunk succeeded).\n"
              f"# Apply with `kubectl apply -f {name}.yaml`; a pod's pids limit is the "
              f"kubelet's podPidsLimit.\n")
    return header + yaml.dump_all(docs, Dumper=yaml_dumper(), sort_keys=False,
                                  default_flow_style=False, width=100)
