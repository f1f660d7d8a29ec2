"""Profile -> a RunPod pod template (JSON). Only image, env and start command reach a pod, so
every cap lives in the image's entrypoint; the template carries explicit variables only."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from launcher.errors import LauncherError
from launcher.flags import Flag
from launcher.render.targets import PROFILE, ProfileRender

_PORT = re.compile(r"^\d{1,5}/(http|tcp|udp)$")


def render_runpod(profile: str, image: str, *, env: dict[str, str], command: list[str] | None,
                  ports: list[str] | None = None, container_disk_gb: int = 40,
                  volume_gb: int = 20) -> str:
    """`image` is what RunPod pulls (a registry name); `ports` only when asked (8888/http)."""
    doc = {
        "name": f"launcher-{profile}",
        "imageName": image,
        "containerDiskInGb": container_disk_gb,
        "volumeInGb": volume_gb,
        "volumeMountPath": "/workspace",
        "ports": ",".join(ports or []),
        "env": [{"key": k, "value": v} for k, v in sorted(env.items())],
        # RunPod's dockerArgs is the start command (the image's CMD), not docker flags.
        "dockerArgs": shlex.join(command) if command else "",
        "isServerless": False,
    }
    return json.dumps(doc, indent=2) + "\n"


class RunPodTarget:
    """runpod.json: a pod template (image, variables, start command, ports)."""

    name = "runpod"
    description = "a RunPod pod template"
    kind = PROFILE
    flags = {"ports": Flag(("--port",), "A port the RunPod pod exposes, e.g. 8888/http. "
                                        "Repeatable.", repeat=True)}

    def check_options(self, own: dict[str, Any]) -> None:
        for p in own.get("ports", ()):
            if not _PORT.match(p):
                raise LauncherError(f"--port: expected PORT/http, PORT/tcp or PORT/udp (got "
                                    f"{p!r})")

    def render_profile(self, job: ProfileRender) -> dict[str, str]:
        if job.push is not None:
            job.notes.append(f"runpod.json names {job.image}, a local tag RunPod cannot pull: "
                             f"pass --image REGISTRY/NAME:TAG and push it with `{job.push}`")
        return {"runpod.json": render_runpod(job.profile, job.image, env=job.env,
                                             command=job.command,
                                             ports=list(job.own.get("ports", ())))}


TARGET = RunPodTarget()
