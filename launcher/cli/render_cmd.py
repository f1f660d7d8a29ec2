"""`launcher render --profile NAME --out DIR`: the flags as a request to the render use case
(launcher/usecases/render.py), and what it wrote in words or JSON."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from launcher.cli.output import parse_env_pairs


def render(*, profile: str, framework: str | None, out: Path, base_image: str | None,
           ca_cert: Path | None, tag: str | None, gpus: str | None, env: list[str] | None,
           host_root: Path | None, as_json: bool, command: str | None = None,
           workload: str | None = None, volumes: list[str] | None = None,
           workdir: str | None = None, user: str | None = None, ports: list[str] | None = None,
           force: bool = False) -> int:
    from launcher.usecases.render import RenderRequest, target_of
    from launcher.usecases.render import render as render_usecase

    target = target_of(command=command, workload=workload, volumes=volumes or [],
                       workdir=workdir, user=user, ports=ports or [])
    done = render_usecase(RenderRequest(
        profile=profile, framework=framework, out=out, base_image=base_image, ca_cert=ca_cert,
        tag=tag, gpus=gpus, env=parse_env_pairs(env), host_root=host_root, target=target,
        force=force))
    for note in done.notes:
        print(f"note: {note}", file=sys.stderr)
    if as_json:
        print(json.dumps({"out": str(out), "files": done.files, "image": done.image,
                          "notes": done.notes}, indent=2))
        return 0
    print(f"rendered profile {done.profile} ({done.framework}) into {out}:")
    for name in done.files:
        print(f"  {name}")
    same = f" or `{done.build}`" if done.build else ""
    print(f"build it with `{shlex.join(['docker', 'build', '-t', done.image, str(out)])}`{same}")
    return 0
