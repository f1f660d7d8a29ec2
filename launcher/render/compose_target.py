"""The compose target of `launcher render`: compose.yaml, a service per GPU where the profile
runs a process per GPU (else one seeing them all), each with its CPUs, memory and variables,
and its own flags (volumes, working directory, user). The rendering is launcher/render/
compose.py's, imported when it renders."""

from __future__ import annotations

import dataclasses
from typing import Any

from launcher.flags import Flag
from launcher.render.targets import PROFILE, ProfileRender


class ComposeTarget:
    name = "compose"
    description = "a Docker Compose stack"
    kind = PROFILE
    flags = {
        "volumes": Flag(("--volume", "-v"), "SRC:DST[:ro] for the compose services. "
                                            "Repeatable.", repeat=True),
        "workdir": Flag(("--workdir", "-w"), "Working directory of the compose services."),
        "user": Flag(("--user",), "UID[:GID] of the compose services."),
    }

    def check_options(self, own: dict[str, Any]) -> None:
        _mounts(own)

    def render_profile(self, job: ProfileRender) -> dict[str, str]:
        from launcher.render.compose import render_compose

        own, lacking = job.own, job.lacking_groups
        services = {name: dataclasses.replace(s, mounts=[*s.mounts, *_mounts(own)],
                                              workdir=own.get("workdir"), user=own.get("user"))
                    for name, s in job.services.items()}
        text = render_compose(job.profile, services, job.per_service, job.notes)
        if lacking:  # told, not written into compose.yaml's head
            job.notes.append(f"this host has no {', '.join(lacking)} group: compose.yaml's "
                             f"group_add lacks its numeric GID; render on the target machine, "
                             f"or add it there (`getent group {lacking[-1]}`)")
        return {"compose.yaml": text}


def _mounts(own: dict[str, Any]) -> list[Any]:
    from launcher.runtime.spec import Mount

    return [Mount.parse(v) for v in own.get("volumes", ())]


TARGET = ComposeTarget()
