"""`launcher jobs plan | run | status`: a chunked job under a profile's caps, fanned out over
GPUs or CPU slots with a pull queue, recorded in a ledger that survives Ctrl-C and kill -9."""

from __future__ import annotations

import json
import os
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING

from launcher.cli.output import parse_env_pairs, print_json, say, table
from launcher.errors import LauncherError
from launcher.units import format_size

if TYPE_CHECKING:
    from launcher.jobs.job import Prepared
    from launcher.render.k8s import IndexedJob


def plan(spec: Path, profile: str | None, framework: str | None, max_concurrent: int | None,
         env: list[str] | None, as_json: bool, host_root: Path | None,
         gpus: str | None = None) -> int:
    from launcher.jobs.job import prepare

    p = prepare(spec, profile, framework, max_concurrent, parse_env_pairs(env), host_root,
                gpus=gpus)
    if p.resolved.selection.shortfall:
        say(f"warning: {p.resolved.selection.shortfall} (`jobs run` refuses)")
    data = {"job": p.spec.name, "profile": p.resolved.profile.name,
            "framework": p.resolved.framework, "folder": str(p.spec.folder()),
            "plan": p.plan.to_json(), "verdict": p.resolved.caps.verdict.level,
            "reasons": p.resolved.caps.verdict.reasons}
    if as_json:
        print_json(data)
        return 0
    pl = p.plan
    print(f"job {p.spec.name}: {pl.sentence()}")
    print(table([(name, str(n)) for name, n in pl.bounds.items()]))
    if pl.nodes > 1:
        print(f"over the spec's {pl.nodes} nodes: {pl.job_concurrency} at once (a Kubernetes "
              f"render's parallelism; `jobs run --backend local` uses this machine alone)")
    memory = (f"its own memory limit {format_size(pl.peak_bytes)}" if pl.peak_bytes else
              f"no memory limit of its own (the profile has no workers.memory; this measures "
              f"one: `{_bench_hint(p, spec, profile, gpus)}`)")
    print(f"each chunk: {memory}, ~{pl.tasks_per_chunk} tasks"
          + (", one GPU" if pl.gpus[0] is not None else ""))
    print(f"folder: {p.spec.folder()} (ledger.sqlite, chunks/NNNNN/out)")
    shortfall = p.resolved.selection.shortfall
    for r in p.resolved.caps.verdict.reasons:
        if not (shortfall and "this host shows" in r):  # said once, at the top
            print(f"  - {r}")
    return 0


def _bench_hint(p: Prepared, spec: Path, profile: str | None, gpus: str | None) -> str:
    """`launcher bench-memory` for this job: half, one and two chunks (within the items),
    writing a profile beside the spec."""
    size, items = p.plan.chunk_size, p.spec.items
    sizes = sorted({min(items, s) for s in (max(1, size // 2), size, 2 * size)})
    if len(sizes) < 2:
        sizes = [1, 2] if items >= 2 else sizes
    measured = p.spec.path.resolve().parent / f"{p.resolved.profile.name}-measured.yaml"
    argv = ["launcher", "bench-memory", str(spec), "--sizes", ",".join(map(str, sizes)),
            "--profile", profile or p.spec.profile, "--write-profile", str(measured)]
    return shlex.join(argv + (["--gpus", gpus] if gpus else []))


def run(spec: Path, profile: str | None, framework: str | None, max_concurrent: int | None,
        env: list[str] | None, runtime: str, image: str | None, backend: str,
        address: str | None, as_json: bool, host_root: Path | None,
        gpus: str | None = None) -> int:
    from launcher.cli.jobs_progress import Progress
    from launcher.jobs import summary as summ
    from launcher.jobs.run import JobRun, run_job

    s, finished = run_job(JobRun(spec, profile=profile, framework=framework,
                                 max_concurrent=max_concurrent, env=parse_env_pairs(env),
                                 runtime=runtime, image=image, backend=backend,
                                 address=address, host_root=host_root, gpus=gpus),
                          progress=Progress, say=say)
    if as_json:
        print_json(s)
    elif s.get("ran", True):  # a job with nothing left said so in one line
        for line in summ.lines(s):
            print(line)
    if not finished:
        return 130
    return 1 if s["counts"]["failed"] else 0


def status(target: Path, as_json: bool) -> int:
    from launcher.jobs import summary as summ
    from launcher.jobs.ledger import Ledger

    folder = _job_folder(target)
    ledger = Ledger(folder / "ledger.sqlite")
    meta = ledger.meta()
    info = json.loads(meta.get("info", "{}"))
    running = ledger.chunks("running")
    s = summ.summarize(ledger, max(1, len(running)))
    ledger.close()
    last = _summary_file(folder)
    holder = _lock_holder(folder)
    now = [{"chunk": c.id, "items": [c.start, c.end], "slot": c.slot, "gpu": c.gpu,
            "for_s": round(time.time() - (c.started or time.time()), 1)} for c in running]
    if holder is None:  # marked running by a launcher that is gone: nothing runs them
        s["counts"] = {**s["counts"], "running": 0, "interrupted": len(running)}
    c = s["counts"]
    data = {**s, "job": info.get("name"), "folder": str(folder),
            "running_now": now if holder else [], "interrupted": [] if holder else [
                {k: v for k, v in r.items() if k != "for_s"} for r in now],
            "runner": holder, "last_run": last,
            "finished": not holder and not c["pending"] and not c["running"]
            and not c.get("interrupted"),
            "rerun": meta.get("rerun") or shlex.join(["launcher", "jobs", "run",
                                                      str(info.get("spec", "SPEC"))])}
    if as_json:
        print_json(data)
        return 0
    for line in _status_lines(data, info, holder):
        print(line)
    return 0


def _job_folder(target: Path) -> Path:
    """The job's folder: the one given, or the spec's (beside it, wherever this runs)."""
    if not target.is_file():
        if not (target / "ledger.sqlite").is_file():
            raise LauncherError(f"{target}: no job ledger here (ledger.sqlite); give a job "
                                f"folder or the job's spec")
        return target
    from launcher.jobs.spec import load_job

    spec = load_job(target)
    folder = spec.folder()
    if not (folder / "ledger.sqlite").is_file():
        raise LauncherError(f"{target}: job {spec.name} has not run yet (no ledger in "
                            f"{folder}): `launcher jobs run {shlex.quote(str(target))}`")
    return folder


def _runner_line(data: dict, holder: str | None) -> str:  # type: ignore[type-arg]
    """Who runs the job; else how to go on, or that it is finished (nothing to go on with)."""
    c = data["counts"]
    if holder:
        return f"runner: {holder}"
    if not data["finished"]:
        return f"runner: none; to go on: `{data['rerun']}`"
    if c["failed"]:
        return (f"finished: {c['done']} done, {c['failed']} failed (why, below); a rerun runs "
                f"nothing more")
    return f"finished: every chunk done ({c['done']} of {c['done']})"


def _status_lines(data: dict, info: dict, holder: str | None) -> list[str]:  # type: ignore[type-arg]
    from launcher.jobs import summary as summ

    c, folder = data["counts"], data["folder"]
    out = [f"job {info.get('name')} in {folder}: {c['done']} done, {c['pending']} pending, "
           + (f"{c['running']} running, " if holder else f"{c['interrupted']} interrupted, ")
           + f"{c['failed']} failed, {c['split']} split ({data['items_done']} of "
             f"{info.get('items')} items)",
           _runner_line(data, holder)]
    for r in data["running_now"]:
        out.append(f"  running: chunk {r['chunk']} (items {r['items'][0]}-{r['items'][1]}) on "
                   f"{r['slot']}{'' if r['gpu'] is None else ' GPU ' + str(r['gpu'])} for "
                   f"{r['for_s']}s")
    for r in data["interrupted"]:
        out.append(f"  interrupted: chunk {r['chunk']} (items {r['items'][0]}-{r['items'][1]})"
                   f" on {r['slot']}{'' if r['gpu'] is None else ' GPU ' + str(r['gpu'])}: its "
                   f"launcher is gone; a rerun runs it again (or records it done if it had "
                   f"finished)")
    out += summ.lines(data)[1:]
    last = data["last_run"]
    if last and last.get("wall_s") is not None:
        out.append("last " + summ.run_line(last).removeprefix("this "))
    return out


def _summary_file(folder: Path) -> dict | None:  # type: ignore[type-arg]
    try:
        return json.loads((folder / "summary.json").read_text())  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return None


def _lock_holder(folder: Path) -> str | None:
    """Who holds the job's lock now, if anyone."""
    import fcntl

    path = folder / ".lock"
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    except BlockingIOError:
        return os.read(fd, 200).decode(errors="replace").strip() or "another launcher"
    finally:
        os.close(fd)


def render(spec: Path, profile: str | None, target: str, out: Path, image: str | None,
           max_concurrent: int | None, gpus: str | None, workdir: str,
           host_root: Path | None, as_json: bool, claim: str | None = None,
           claim_size: str | None = None, base_image: str | None = None) -> int:
    """The job as a Kubernetes Indexed Job, for the profile's machine (GPUs from the profile,
    not looked for here): the manifest (the results claim, unless one is named, and the Job),
    and the Dockerfile of the image the pods pull (launcher's image plus the job's folder)."""
    from launcher.jobs.job import prepare
    from launcher.render.images import default_tag
    from launcher.render.k8s import (
        MIN_VERSION,
        check_image,
        claim_name,
        k8s_name,
        render_dockerfile,
        render_indexed_job,
    )

    if target != "k8s":
        raise LauncherError(f"--target must be k8s (got {target!r})")
    job_image = image or _spec_image(spec)
    if not job_image:
        raise LauncherError("jobs render: the pods pull their image: pass --image "
                            "REGISTRY/NAME:TAG (pushed; build launcher's with `launcher build "
                            "--push --image REGISTRY/NAME:TAG`)")
    check_image(job_image)
    if claim is not None and not _DNS.match(claim):
        raise LauncherError(f"--claim: a claim's name is lowercase letters, digits, '-' and "
                            f"'.' (got {claim!r})")
    if claim is not None and claim_size is not None:
        raise LauncherError("--claim names an existing claim; --claim-size sizes the one the "
                            "render writes: give one of them")
    p = prepare(spec, profile, None, max_concurrent, None, host_root, inherit_shell=False,
                gpus=gpus, on_this_host=False)  # for the cluster, not this shell
    r = p.resolved
    base = base_image or default_tag(r.profile.name, r.framework)
    job = _indexed_job(p, job_image, workdir, claim, _claim_size(claim_size))
    name = k8s_name(p.spec.name)
    out.mkdir(parents=True, exist_ok=True)
    path, dockerfile = out / f"{name}.yaml", out / f"{name}.Dockerfile"
    context = p.spec.path.resolve().parent
    build = (f"docker build -f {shlex.quote(str(dockerfile))} -t {shlex.quote(job_image)} "
             f"{shlex.quote(str(context))} && docker push {shlex.quote(job_image)}")
    _write(dockerfile, render_dockerfile(p.spec.name, base, workdir, build))
    _write(dockerfile.with_name(dockerfile.name + ".dockerignore"),
           _dockerignore(context, p.spec.folder(), out.resolve(),
                         [path.name, dockerfile.name, dockerfile.name + ".dockerignore"]))
    _write(path, render_indexed_job(job))
    if as_json:
        print_json({"file": str(path), "dockerfile": str(dockerfile), "build": build,
                    "completions": job.chunks, "parallelism": job.parallelism,
                    "image": job.image, "claim": claim_name(job),
                    "kubernetes": f"{MIN_VERSION} or later"})
    else:
        print(f"wrote {path}: an Indexed Job of {job.chunks} chunks, {job.parallelism} at once "
              f"({_across(p)}), results on the claim {claim_name(job)}"
              + ("" if claim else f" (written too, {job.claim_size}, ReadWriteMany)")
              + f"; Kubernetes {MIN_VERSION} or later")
        print(f"wrote {dockerfile}: {job.image} is {base} with the job's folder in {workdir}; "
              f"build and push it: {build}")
        print(f"then `kubectl apply -f {shlex.quote(str(path))}`; pids are bounded by the "
              f"kubelet's podPidsLimit (~{p.plan.tasks_per_chunk} tasks per chunk)")
    return 0


_DNS = __import__("re").compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def _spec_image(spec: Path) -> str | None:
    from launcher.jobs.spec import load_job

    return load_job(spec).image


def _claim_size(text: str | None) -> str:
    """A claim's size as a Kubernetes quantity (launcher's sizes are binary: 10GiB, 500MiB)."""
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


def _indexed_job(p: Prepared, image: str, workdir: str, claim: str | None,
                 claim_size: str) -> IndexedJob:
    from launcher.render.k8s import IndexedJob
    from launcher.vendors import get as get_vendor

    r, pl = p.resolved, p.plan
    vendor = get_vendor(r.selection.vendor) if r.selection.vendor != "none" else None
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


def _across(p: Prepared) -> str:
    """Where the Job's parallelism comes from: each node's cap, times the spec's nodes."""
    pl = p.plan
    each = f"each node's cap {pl.concurrency}, set by {pl.binding}"
    if pl.nodes == 1:
        return f"one node: {each}; the spec's `nodes` says how many run it"
    capped = " (the chunks)" if pl.job_concurrency < pl.concurrency * pl.nodes else ""
    return f"{pl.nodes} nodes x {each}{capped}"


def _dockerignore(context: Path, folder: Path, out: Path, rendered: list[str]) -> str:
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


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def ray_node(profile: str, address: str | None, gpus: str | None, host_root: Path | None,
             as_json: bool) -> int:
    """The `ray start` command that declares this node's GPUs, memory and cap."""
    import shlex

    from launcher.caps.resolve import resolve
    from launcher.jobs.job import Prepared
    from launcher.jobs.plan import plan_job
    from launcher.jobs.ray_backend import node_command
    from launcher.jobs.spec import JobSpec
    from launcher.probe import probe_host
    from launcher.profiles import load_profile

    facts = probe_host(host_root or "/")
    r = resolve(load_profile(profile), facts, processes=1, gpus=gpus, inherited=facts.env,
                clamp=True, gpus_per_process=1)  # each chunk sees its own GPU
    node = JobSpec(path=Path("ray-node"), name="ray-node", command=["true"], items=1)
    p = Prepared(node, r, plan_job(node, r))
    cmd = node_command(p, address)
    if as_json:
        print_json({"command": cmd, "cap": p.plan.concurrency, "binding": p.plan.binding})
        return 0
    print(shlex.join(cmd))
    say(f"cap {p.plan.concurrency} chunks on this node ({p.plan.binding})")
    return 0
