"""The compose target of `launcher render`: compose.yaml, a service per GPU where the profile
runs a process per GPU (else one seeing them all), each with its CPUs, memory and variables.
The rendering is launcher/render/compose.py's, imported when it renders."""

from __future__ import annotations

from launcher.render.targets import PROFILE, ProfileRender


class ComposeTarget:
    name = "compose"
    description = "a Docker Compose stack"
    kind = PROFILE

    def render_profile(self, job: ProfileRender) -> dict[str, str]:
        from launcher.render.compose import render_compose

        return {"compose.yaml": render_compose(job.profile, job.services, job.per_service,
                                               job.notes)}


TARGET = ComposeTarget()
