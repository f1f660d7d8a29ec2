"""`launcher run WORKLOAD [ARGS] | -- CMD...`: the flags as a request to the run use case
(launcher/usecases/run.py), its lines and the workload's output on the terminal, and a dry
run in words or JSON."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING

from launcher.cli.output import print_json, say, show_event
from launcher.errors import LauncherError
from launcher.units import format_rlimit, format_size

if TYPE_CHECKING:
    from launcher.usecases.run import DryRun, RunRequest, RunSpec


def run(req: RunRequest, *, as_json: bool) -> int:
    from launcher.usecases.run import run as run_usecase

    if as_json and not req.dry_run:
        raise LauncherError("--json describes a dry run (--dry-run --json); a run's summary is "
                            "runs/RUN-ID/summary.json, and `launcher report RUN_DIR --json` "
                            "prints it")
    result = run_usecase(req, on_event=show_event, on_output=_print_output)
    if result.help is not None:
        print(result.help)
    if result.dry_run is not None:
        _print_dry_run(result.dry_run, as_json=as_json)
    return -result.signal if result.signal else result.status  # entry.exit_now: ends by it


def _print_dry_run(d: DryRun, *, as_json: bool) -> None:
    if as_json:
        print_json({"runtime": d.runtime, "framework": d.framework,
                    "framework_from": d.framework_from, "spec": d.spec.to_json(),
                    "request": d.request, "threads_estimate": d.estimate, "verdict": d.verdict,
                    "advisory": d.advisory, "refused_by": d.refused_by})
        return
    print(describe_spec(d.runtime, d.spec))
    print(f"threads: {d.threads} estimated for the whole run ({d.estimate['source']})")
    print(f"framework: {d.framework}, from {d.framework_from}")
    for cap, why in d.advisory.items():
        print(f"advisory here: {cap} ({why})")
    if d.refused_by:
        print(f"a real run refuses: {d.refused_by}")


def _print_output(stream: str, data: bytes) -> None:
    """The workload's output, as it comes; a reader gone (`| head`) raises BrokenPipeError,
    which stops the run, with nothing more written there. Another write error (ENOSPC from
    `> /dev/full`, EIO) drops the rest of that stream, said once: the workload runs on, as
    it would where its own write failed and it went on."""
    target = sys.stdout if stream == "stdout" else sys.stderr
    if stream in _FAILED:
        return
    try:
        target.buffer.write(data)
        target.buffer.flush()
    except BrokenPipeError:
        with contextlib.suppress(OSError):  # nothing more to write there, nor at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), target.fileno())
        raise
    except OSError as exc:
        _FAILED.add(stream)
        with contextlib.suppress(OSError):  # nothing more to write there, nor at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), target.fileno())
        say(f"warning: the workload's {stream} cannot be written: {exc.strerror or exc}; "
            f"the rest of it is dropped")


_FAILED: set[str] = set()  # streams whose writes failed (not a closed reader)


_print_output.passthrough = True  # type: ignore[attr-defined]  # runtime.engine.passes_through


def describe_spec(runtime: str, spec: RunSpec) -> str:
    """A dry run for people: the spec in words, sizes with units (--json has everything)."""
    lim = spec.limits
    lines = [f"dry run ({runtime}): {spec.image or '(no image)'}",
             f"  command: {' '.join(spec.command)}"]
    limits = [f"pids {lim.pids}" if lim.pids else "",
              f"memory {format_size(lim.memory)}" + (" (no swap)" if lim.swap == 0 else "")
              if lim.memory else "",
              f"shm {format_size(lim.shm)}" if lim.shm else "",
              f"cpus {lim.cpus:g}" if lim.cpus else ""]
    lines.append(f"  limits: {', '.join(x for x in limits if x) or 'none of ours'}")
    if spec.ulimits:
        lines.append("  ulimits: " + ", ".join(
            f"{n} {format_rlimit(n, u.soft)}/{format_rlimit(n, u.hard)}"
            for n, u in spec.ulimits.items()))
    if spec.gpus.ids:
        a = spec.gpu_access
        access = [f"devices {', '.join(a.devices)}" if a.devices else "",
                  f"groups {', '.join(a.groups)}" if a.groups else "",
                  "seccomp unconfined" if a.unconfined_syscalls else "",
                  (f"device request {a.request.driver} "
                   f"{'all' if a.request.ids is None else ','.join(a.request.ids)}")
                  if a.request else ""]
        lines.append(f"  gpus: {spec.gpus.vendor} {'all' if spec.gpus.all else ''} "
                     f"{', '.join(map(str, spec.gpus.ids))}; "
                     + "; ".join(x for x in access if x))
    for m in spec.mounts:
        lines.append(f"  mount: {m.source} -> {m.target}{' (read-only)' if m.read_only else ''}")
    if spec.workdir:
        lines.append(f"  workdir: {spec.workdir}")
    if spec.user:
        lines.append(f"  user: {spec.user}")
    lines.append("  environment:")
    lines += [f"    {k}={v}" for k, v in spec.supervisor_env().items()]
    lines.append("  (the exact request: add --json)")
    return "\n".join(lines)

