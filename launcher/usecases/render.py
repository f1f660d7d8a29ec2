"""`launcher render`: every file a user can read, commit and build (Dockerfile, entrypoint,
compose.yaml, RunPod template, caps), rendered in memory and written whole into a folder."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launcher.caps.resolve import Resolved
from launcher.contract import IN_IMAGE
from launcher.errors import LauncherError
from launcher.flags import (
    BASE_IMAGE,
    CA_CERT,
    ENV,
    FRAMEWORK,
    GPUS,
    HOST_ROOT,
    PROFILE,
    TAG,
    Flag,
    flag,
    plugin_flags,
)
from launcher.render.compose import service_specs
from launcher.render.dockerfile import PACKAGE_DIRS, context_files, copy_package, image_spec
from launcher.render.images import default_tag
from launcher.render.targets import PROFILE as PROFILE_KIND
from launcher.render.targets import ProfileRender, check_profile_options, profile_targets
from launcher.runtime.spec import Mount, RunSpec
from launcher.units import format_size
from launcher.usecases.build_request import build_command

RESULTS = "/workspace/runs"  # where a rendered workload writes (RunPod's volume, compose's ./runs)
MARKER = ".launcher-render"  # the files a render wrote: a later render may replace them


@dataclass(frozen=True, kw_only=True)
class Target:
    """What the rendered stack and pod run: a command, its variables and volumes (a workload's
    results folder), and the framework."""

    command: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)  # besides --env
    mounts: tuple[Mount, ...] = ()
    framework: str | None = None  # a workload's, when --framework is not given


@dataclass(frozen=True, kw_only=True)
class RenderRequest:
    out: Path = flag(Flag(("--out", "-o"), "Folder to write the files into.", kind="path"),
                     dataclasses.MISSING)
    profile: str = flag(PROFILE, "auto")
    framework: str | None = flag(FRAMEWORK)
    base_image: str | None = flag(BASE_IMAGE)
    ca_cert: Path | None = flag(CA_CERT)
    tag: str | None = flag(TAG)
    gpus: str | None = flag(GPUS)
    env: dict[str, str] = flag(ENV, {})
    command: str | None = flag(Flag(("--command",), "Start command for compose and RunPod "
                                                    "(shell-style words)."))
    workload: str | None = flag(Flag(
        ("--workload",), "Run a built-in workload instead, e.g. 'stress-jax --phase 1' (results "
        "in ./runs beside compose.yaml, /workspace/runs on RunPod)."))
    targets: tuple[str, ...] = flag(Flag(("--target",), "Write only this target's file: "
                                         "${profile_targets}. Repeatable (default: every one).",
                                         repeat=True), ())
    force: bool = flag(Flag(("--force",), "Replace files in --out that launcher did not write.",
                            kind="bool"), False)
    host_root: Path | None = flag(HOST_ROOT)
    target_options: dict[str, Any] = plugin_flags("launcher.render_targets", PROFILE_KIND)

    def target(self) -> Target:
        return target_of(command=self.command, workload=self.workload)


@dataclass(frozen=True, kw_only=True)
class RenderResult:
    out: Path
    files: list[str]  # what is in `out` now, sorted (the folders as "launcher/", "plugins/")
    image: str
    notes: list[str]
    profile: str
    framework: str
    build: str | None  # the `launcher build` of the same image, where it builds the same


def target_of(*, command: str | None, workload: str | None) -> Target:
    """--command or --workload, checked."""
    if command and workload:
        raise LauncherError("give --command or --workload, not both")
    words: list[str] = _split("--command", command) if command else []
    # every service's run record (the supervisor's watch), and a built-in workload's output
    env: dict[str, str] = {"LAUNCHER_RUNS_DIR": RESULTS}
    mounts: list[Mount] = [Mount("./runs", RESULTS)]
    framework = None
    if workload:
        words, framework = _workload_command(workload)
        env = {"PYTHONPATH": IN_IMAGE, **env}
    return Target(command=tuple(words), env=env, mounts=tuple(mounts), framework=framework)


def _workload_command(workload: str) -> tuple[list[str], str]:
    """A built-in workload's command in the image, its flags checked by its own parser."""
    import contextlib
    import io

    from launcher.workloads.catalog import catalog

    words = _split("--workload", workload)
    w = catalog().get(words[0]) if words else None
    if w is None or w.module is None:
        known = ", ".join(n for n, x in catalog().items() if x.module)
        raise LauncherError(f"--workload: no built-in workload "
                            f"{words[0] if words else ''!r} (known: {known})")
    parser = w.parser()
    if parser is not None:
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                parser.parse_args(words[1:])
        except SystemExit:
            last = err.getvalue().strip().splitlines()[-1:] or ["bad arguments"]
            raise LauncherError(f"--workload {workload!r}: {last[0]}") from None
    return w.argv(words[1:], "python3"), w.framework


def render_files(r: Resolved, *, base_image: str | None, ca_cert: Path | None, tag: str,
                 target: Target | None = None, targets: tuple[str, ...] = (),
                 own: dict[str, Any] | None = None,
                 push: str | None = None) -> tuple[dict[str, str], list[str]]:
    """All text files of a render, in memory (nothing is written if any step fails), and the
    notes to tell the user: the profile targets' files (those in `targets`, else all), each
    given the flags in `own` (checked: check_profile_options) and `push` (ProfileRender's)."""
    from launcher.vendors import get as get_vendor

    target = target or Target()
    if ca_cert is not None and not ca_cert.is_file():
        raise LauncherError(f"--ca-cert: no such file {str(ca_cert)!r}")
    spec = image_spec(r.profile, r.framework, r.selection.vendor, base_image,
                      ca_cert is not None)
    caps_doc = {"recipe": r.recipe(), "resolved_on_build_host": r.caps.to_json()}
    files = context_files(spec, caps_doc)
    command = list(target.command)
    services = service_specs(r, command, tag)
    for s in services.values():
        s.mounts = list(target.mounts)
    env = {**target.env, **r.overrides}
    per_service = {name: {**target.env, "LAUNCHER_RUN_DIR": f"{RESULTS}/{name}", **r.overrides}
                   for name in services}
    notes = _memory_notes(r, services)
    if not command:
        notes.append("no --command or --workload was given: the services run the image's CMD "
                     "(python3), which exits at once without a terminal")
    job = ProfileRender(profile=r.profile.name, image=tag, services=services,
                        per_service=per_service, env=env, command=command, notes=notes,
                        own=dict(own or {}), push=push,
                        lacking_groups=[g for g in get_vendor(r.selection.vendor).host_groups
                                        if g not in r.facts.groups])
    for each in profile_targets(targets):  # compose, RunPod, a third party's
        files.update(each.render_profile(job))
    if ca_cert is not None:
        files["launcher-ca.crt"] = ca_cert.read_text()
    return files, notes


def _memory_notes(r: Resolved, services: dict[str, RunSpec]) -> list[str]:
    budget = r.caps.limits["memory"].value
    limits = [s.limits.memory for s in services.values() if s.limits.memory]
    reserved = [s.limits.memory_reservation for s in services.values()
                if s.limits.memory_reservation]
    if not budget or len(services) < 2 or not limits or sum(limits) <= budget:
        return []
    n = len(services)
    return [f"memory: {n} services x {format_size(limits[0])} limit = "
            f"{format_size(sum(limits))} exceed the {format_size(int(budget))} budget; each "
            f"limit is the measured peak {format_size(reserved[0]) if reserved else '?'} plus "
            f"25% headroom, and the {format_size(sum(reserved))} of peaks "
            f"{'fit' if sum(reserved) <= budget else 'do NOT fit'} (peaks rarely coincide; "
            f"lower workers.memory or the GPU count if they do)"]


def write_tree(out: Path, files: dict[str, str], *, force: bool = False,
               package: bool = True) -> None:
    """Write files (and the launcher package, with `package`): launcher's one file writer, for
    every render. Each file is replaced whole, never half-written; files launcher did not write
    are never replaced, unless `force`."""
    if out.exists() and not out.is_dir():
        raise LauncherError(f"--out {out}: not a folder")
    dirs = PACKAGE_DIRS if package else []
    names = [*files, *dirs]
    ours = set(_previous(out))
    clash = [n for n in names if (out / n).exists() and n not in ours]
    if clash and not force:
        raise LauncherError(f"--out {out} already holds {', '.join(clash)}, which launcher did "
                            f"not write; choose an empty folder, or pass --force to replace "
                            f"them")
    try:
        out.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".launcher-render-", dir=out))
    except OSError as exc:
        raise LauncherError(f"--out {out}: cannot write there ({exc.strerror})") from None
    try:
        for name, text in files.items():
            (staging / name).write_text(text)
        if package:
            copy_package(staging)
        if package:  # a render's folder: what a later render may replace
            (staging / MARKER).write_text(json.dumps(sorted({*names, *ours})) + "\n")
        for name in [*files, *([MARKER] if package else [])]:
            os.replace(staging / name, out / name)
        for name in dirs:
            if (out / name).exists():
                shutil.rmtree(out / name)
            os.replace(staging / name, out / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _previous(out: Path) -> list[str]:
    try:
        return list(json.loads((out / MARKER).read_text()))
    except (OSError, ValueError, TypeError):
        return []


def render(req: RenderRequest) -> RenderResult:
    from launcher.caps.load import load_and_resolve

    check_profile_options(req.targets, req.target_options)
    target = req.target()
    r = load_and_resolve(req.profile, host_root=req.host_root, inherit_shell=False,
                         framework=req.framework or target.framework,
                         overrides=dict(req.env), gpus=req.gpus, for_this_host=False)
    image = req.tag or default_tag(r.profile.name, r.framework)
    cert = None if req.ca_cert is None else str(req.ca_cert)
    push = None if req.tag is not None else build_command(
        req.profile, r.framework, image="REGISTRY/NAME:TAG", base_image=req.base_image,
        ca_cert=cert, push=True)
    files, notes = render_files(r, base_image=req.base_image, ca_cert=req.ca_cert, tag=image,
                                target=target, targets=req.targets, own=req.target_options,
                                push=push)
    write_tree(req.out, files, force=req.force)
    # `launcher build` takes no --env or --gpus: then only docker builds what was written
    same = None if req.env or req.gpus else build_command(
        req.profile, r.framework, image=req.tag, base_image=req.base_image, ca_cert=cert)
    folders = [f"{d}/" for d in PACKAGE_DIRS]
    return RenderResult(out=req.out, files=sorted([*files, *folders]), image=image,
                        notes=notes, profile=r.profile.name, framework=r.framework, build=same)


def _split(flag: str, text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise LauncherError(f"{flag}: cannot split {text!r} like a shell would ({exc})") from None
