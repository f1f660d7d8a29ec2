"""The framework `launcher run` budgets threads for, and where it came from: --framework, else a
built-in workload's, else the one its Python script imports (launcher/frameworks/detect.py),
else the profile's `framework` key, else none. A profile names one framework for all it runs;
the script says what this run is."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from launcher.defaults import NONE
from launcher.usecases.run_request import RunRequest
from launcher.workloads.catalog import Workload

if TYPE_CHECKING:
    from launcher.profiles.loader import Profile


@dataclass(frozen=True)
class FrameworkChoice:
    name: str
    source: str  # "--framework", "train.py:3 (import torch)", "profile framework (FILE:LINE)"
    detected: bool = False  # read from the script's imports
    also: tuple[str, ...] = ()  # the other frameworks the script imports

    def start_words(self) -> str:
        """What the start line adds: where a framework read from the script was found."""
        if not self.detected:
            return ""
        others = ", ".join(self.also)
        return f"; framework read from {self.source}" + (
            f"; it imports {others} too (--framework {self.also[0]} budgets for that)"
            if others else "")


def choose_framework(req: RunRequest, workload: Workload | None, prof: Profile) -> FrameworkChoice:
    if req.framework:
        return FrameworkChoice(req.framework, "--framework")
    if workload is not None:
        return FrameworkChoice(workload.framework, f"workload {workload.name}")
    from launcher.frameworks import known
    from launcher.frameworks.detect import detect

    found = detect(req.command, req.workdir or os.getcwd(), {**os.environ, **req.env})
    if found.framework is not None and known(found.framework):
        return FrameworkChoice(found.framework, found.where, True,
                               tuple(f for f in found.found if f != found.framework))
    named = prof.get("framework")
    if named is not None:
        return FrameworkChoice(named, f"profile framework ({prof.where('framework')})")
    return FrameworkChoice(NONE, "no framework named")
