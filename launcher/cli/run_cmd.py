"""`launcher run WORKLOAD [ARGS] | -- CMD...`: a capped container, streamed, status passed on."""

from __future__ import annotations

import sys
from pathlib import Path

from launcher.caps.plan import clamp_ulimits
from launcher.cli.common import default_tag, prepare
from launcher.cli.output import print_json
from launcher.errors import LauncherError
from launcher.runtime.engine import get_engine
from launcher.runtime.spec import container_spec

PACKAGE = Path(__file__).resolve().parents[1]


def run(command: list[str], profile: str, framework: str | None, processes: int | None,
        runtime: str, image: str | None, gpus: str | None, env: list[str] | None,
        dry_run: bool, as_json: bool, host_root: Path | None, name: str | None) -> int:
    if not command:
        raise LauncherError("nothing to run: give a workload or a command after --, e.g. "
                            "`launcher run -- python3 -c 'import numpy'`")
    if runtime != "docker":
        raise LauncherError(f"--runtime {runtime}: only the docker runtime is available so far")
    p = prepare(profile, framework, processes, env, gpus, host_root)
    clamp_ulimits(p.caps, p.facts)
    image = image or default_tag(p.profile.name, p.framework)
    spec = container_spec(p.caps, p.choice, p.facts, image, command,
                          mount_supervisor=str(PACKAGE), name=name)
    if dry_run:
        if as_json:
            print_json(spec)
        else:
            _print_spec(spec)
        return 0
    if p.caps.verdict.level == "refuse":
        raise LauncherError("refused: " + " ".join(p.caps.verdict.reasons) +
                            " (see `launcher plan`)")
    from launcher.supervise.report import report

    report(p.caps, False, lambda msg: print(f"launcher: {msg}", file=sys.stderr, flush=True))
    engine = get_engine()
    out, err = sys.stdout.buffer, sys.stderr.buffer

    def sink(stream: str, data: bytes) -> None:
        target = out if stream == "stdout" else err
        target.write(data)
        target.flush()

    return engine.run(spec, sink)


def _print_spec(spec: dict) -> None:  # type: ignore[type-arg]
    for key, value in spec.items():
        if key == "environment":
            print("environment:")
            for k, v in value.items():
                shown = "<profile recipe, JSON>" if k == "LAUNCHER_RECIPE" else v
                print(f"  {k}={shown}")
        else:
            print(f"{key}: {value}")
