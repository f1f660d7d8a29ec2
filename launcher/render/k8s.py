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
from pathlib import Path
from typing import Any

from launcher import contract as c
from launcher.contract import ITEMS_DIR as ITEMS
from launcher.flags import Flag
from launcher.render.images import check_image_ref, pushed
from launcher.render.targets import JobRenderOptions, PreparedJob, RenderedJob
from launcher.render.yamltext import yaml_dumper

RESULTS = "/results"
MIN_VERSION = "1.29"
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

    check_image_ref(base, "--base-image")
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
    env = {**j.env, c.JOB_ID: j.name, c.ITEMS: str(j.items),
           c.CHUNK_SIZE: str(j.chunk_size), c.CHUNK_OUT_ROOT: RESULTS}
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
        env[c.ITEMS_FILE] = f"{ITEMS}/items.txt"
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


_DNS = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def claim_quantity(text: str | None) -> str:
    """A claim's size as a Kubernetes quantity (launcher's sizes are binary: 10GiB, 500MiB)."""
    from launcher.errors import LauncherError
    from launcher.units import parse_size

    if text is None:
        return "10Gi"
    try:
        n = parse_size(text)
    except ValueError as exc:
        raise LauncherError(f"--claim-size: {exc} (got {text!r})") from None
    for unit, shift in (("Ti", 40), ("Gi", 30), ("Mi", 20)):
        if n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def indexed_job(p: PreparedJob, image: str, workdir: str, claim: str | None,
                claim_size: str) -> IndexedJob:
    """A prepared job (its spec, the profile resolved for the cluster's machine, the plan) as
    an Indexed Job's values."""
    from launcher.errors import LauncherError
    from launcher.vendors import get as get_vendor

    r, pl = p.resolved, p.plan
    vendor = get_vendor(r.selection.vendor)
    vendor = vendor if vendor.has_gpus else None
    items_text = p.spec.items_file.read_text() if p.spec.items_file else None
    if items_text is not None and len(items_text.encode()) > 900_000:
        raise LauncherError(f"{p.spec.items_file}: {len(items_text.encode())} bytes of items "
                            f"do not fit a ConfigMap (1 MiB); bake the file into the image")
    return IndexedJob(
        name=p.spec.name, image=image, command=p.spec.command, items=p.spec.items,
        chunk_size=pl.chunk_size, chunks=len(pl.chunks), parallelism=pl.job_concurrency,
        retries=p.spec.retries, memory=pl.peak_bytes,
        cpus=float(max(1, r.caps.threads["omp"])),
        gpu_resource=vendor.k8s_resource if vendor else None,
        shm=int(r.caps.limits["shm"].value) if r.caps.limits["shm"].value else None,
        env=p.spec.env, items_text=items_text, workdir=workdir,
        tasks_per_chunk=pl.tasks_per_chunk, claim=claim, claim_size=claim_size)


def _across(p: PreparedJob) -> str:
    """Where the Job's parallelism comes from: each node's cap, times the spec's nodes."""
    pl = p.plan
    each = f"each node's cap {pl.concurrency}, set by {pl.binding}"
    if pl.nodes == 1:
        return f"one node: {each}; the spec's `nodes` says how many run it"
    capped = " (the chunks)" if pl.job_concurrency < pl.concurrency * pl.nodes else ""
    return f"{pl.nodes} nodes x {each}{capped}"


def dockerignore(context: Path, folder: Path, out: Path, rendered: list[str]) -> str:
    """What the job's image leaves out of its folder (the build context): runs, the job's own
    output folder, and the render's: its folder when it is below the context, else its files
    when it is the context itself."""
    lines = ["runs/", ".git/", "**/__pycache__/"]
    for below in (folder, out):
        if below.is_relative_to(context) and below != context:
            lines.append(f"{below.relative_to(context).as_posix()}/")
    if out == context:
        lines += rendered
    return "".join(line + "\n" for line in lines if "\n" not in line)


class KubernetesTarget:
    """The job as a Kubernetes Indexed Job, for the profile's machine (GPUs from the profile,
    not looked for here): the manifest (the results claim, unless one is named, and the Job),
    and the Dockerfile of the image the pods pull (launcher's image plus the job's folder)."""

    name = "k8s"
    description = "a Kubernetes Indexed Job"
    flags = {
        "claim": Flag(("--claim",), "An existing PersistentVolumeClaim for the results "
                                    "(default: the render writes one, JOB-results)."),
        "claim_size": Flag(("--claim-size",), "Size of the claim the render writes (default "
                                              "10GiB)."),
        "base_image": Flag(("--base-image",), "launcher's image the job's image starts FROM "
                           "(default launcher/PROFILE:FRAMEWORK, from `launcher build`)."),
    }

    def check(self, options: JobRenderOptions) -> None:
        from launcher.errors import LauncherError

        if not options.image:
            raise LauncherError("jobs render: the pods pull their image: pass --image "
                                "REGISTRY/NAME:TAG (pushed; build launcher's with `launcher "
                                "build --push --image REGISTRY/NAME:TAG`)")
        check_image(options.image)
        claim = options.own.get("claim")
        if claim is not None and not _DNS.match(claim):
            raise LauncherError(f"--claim: a claim's name is lowercase letters, digits, '-' "
                                f"and '.' (got {claim!r})")
        if claim is not None and options.own.get("claim_size") is not None:
            raise LauncherError("--claim names an existing claim; --claim-size sizes the one "
                                "the render writes: give one of them")

    def render(self, job: PreparedJob, options: JobRenderOptions) -> RenderedJob:
        import shlex

        from launcher.render.images import default_tag

        self.check(options)
        assert options.image is not None  # checked
        r, workdir, out = job.resolved, options.workdir, options.out
        own = options.own
        base = own.get("base_image") or default_tag(r.profile.name, r.framework)
        j = indexed_job(job, options.image, workdir, own.get("claim"),
                        claim_quantity(own.get("claim_size")))
        name = k8s_name(job.spec.name)
        path, dockerfile = out / f"{name}.yaml", out / f"{name}.Dockerfile"
        context = job.spec.path.resolve().parent
        build = (f"docker build -f {shlex.quote(str(dockerfile))} -t {shlex.quote(j.image)} "
                 f"{shlex.quote(str(context))} && docker push {shlex.quote(j.image)}")
        ignore = dockerfile.name + ".dockerignore"
        files = {dockerfile.name: render_dockerfile(job.spec.name, base, workdir, build),
                 ignore: dockerignore(context, job.spec.folder(), out.resolve(),
                                      [path.name, dockerfile.name, ignore]),
                 path.name: render_indexed_job(j)}
        data = {"file": str(path), "dockerfile": str(dockerfile), "build": build,
                "completions": j.chunks, "parallelism": j.parallelism, "image": j.image,
                "claim": claim_name(j), "kubernetes": f"{MIN_VERSION} or later"}
        lines = [f"wrote {path}: an Indexed Job of {j.chunks} chunks, {j.parallelism} at once "
                 f"({_across(job)}), results on the claim {claim_name(j)}"
                 + ("" if own.get("claim") else f" (written too, {j.claim_size}, ReadWriteMany)")
                 + f"; Kubernetes {MIN_VERSION} or later",
                 f"wrote {dockerfile}: {j.image} is {base} with the job's folder in {workdir}; "
                 f"build and push it: {build}",
                 f"then `kubectl apply -f {shlex.quote(str(path))}`; pids are bounded by the "
                 f"kubelet's podPidsLimit (~{job.plan.tasks_per_chunk} tasks per chunk)"]
        return RenderedJob(files=files, lines=lines, data=data)


TARGET = KubernetesTarget()
