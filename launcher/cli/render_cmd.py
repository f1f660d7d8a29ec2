"""`launcher render --profile NAME --out DIR`: the flags as a request to the render use case
(launcher/usecases/render.py), and what it wrote in words or JSON."""

from __future__ import annotations

import json
import shlex
import sys

from launcher.cli.declare import JSON, command
from launcher.usecases.render import RenderRequest


def render(req: RenderRequest, *, as_json: bool) -> int:
    from launcher.usecases.render import render as render_usecase

    done = render_usecase(req)
    out = req.out
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


COMMAND = command("render", RenderRequest, render, own=(JSON,), help="""Write the Dockerfile,
entrypoint, compose.yaml (one service per GPU where the profile runs a process per GPU, else one
seeing them all; each with its CPUs and memory), the RunPod template and the caps into a folder
you can read, commit and `docker build`.""")
