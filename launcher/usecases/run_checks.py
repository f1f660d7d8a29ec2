"""The checks before a run starts, the cheapest first: the plan's verdict (and an override of
it), the framework a built-in workload needs, the limits the engine cannot enforce here, and
why no container engine answers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from launcher.caps.model import Why
from launcher.caps.resolve import Resolved
from launcher.errors import LauncherError, Refused
from launcher.runtime.engine import Engine
from launcher.runtime.spec import RunSpec
from launcher.usecases.events import Teller
from launcher.usecases.run_request import RunRequest
from launcher.workloads.catalog import Workload


def plan_command(req: RunRequest, workload: Workload | None,
                 detected: str | None = None) -> str:
    """The `launcher plan` that shows this run's verdict: the same profile and options (a
    framework read from the script's imports as --framework: plan has no command)."""
    import shlex

    from launcher.flags import argv_of
    from launcher.usecases.plan import PlanRequest

    same = PlanRequest(profile=req.profile, framework=req.framework or detected,
                       processes=req.processes, env=req.env, gpus=req.gpus,
                       workload=workload and workload.name,
                       fit=req.fit, host_root=req.host_root)
    return shlex.join(["launcher", "plan", *argv_of(same, always=("profile",))])


def check_verdict(r: Resolved, plan: Callable[[], str],
                  override_by: str | None) -> Override | None:
    """A refused plan, every reason at once (a GPU shortfall's too); GPUs this host lacks.
    With an override (`override_by`), a refusal the estimate made is run all the same: what
    was overridden comes back. GPUs that are not there are never overridden. `plan` makes
    the `launcher plan` command line a refusal names (only then: it imports plan's use case)."""
    short = r.selection.shortfall
    if r.caps.verdict.level != "refuse":
        if short:
            raise LauncherError(short)
        return None
    reasons = r.caps.verdict.reasons
    if short:  # its own words: how many this host has, and what to pass
        reasons = [x.text for x in r.caps.verdict.said if x.kind is not Why.GPU_SHORT]
        reasons.append(f"{short[0].upper()}{short[1:]}.")
    if override_by is None or short:
        fix = (f" ({override_by} adds no GPUs)" if override_by else "") if short else \
            " --override runs it anyway, where you know better"
        raise Refused("refused: " + " ".join(reasons) + f"{fix} (see `{plan()}`)")
    return Override(by=override_by, level="refuse", reasons=tuple(reasons), plan=plan())


@dataclass(frozen=True)
class Override:
    """A refusal run anyway: who said so, and the plan's verdict and reasons."""

    by: str
    level: str
    reasons: tuple[str, ...]
    plan: str

    def words(self) -> str:
        said = " ".join(self.reasons).rstrip(".")
        return f"the plan refused this run ({said}), and {self.by} ran it anyway"

    def to_json(self) -> dict[str, Any]:
        return {"by": self.by, "verdict": self.level, "reasons": list(self.reasons),
                "plan": self.plan}


def who_overrides(req: RunRequest, r: Resolved) -> str | None:
    if req.override:
        return "--override"
    if r.profile.get("limits.override"):
        return f"limits.override ({r.profile.where('limits.override')})"
    return None


def check_framework(workload: str, framework: str) -> None:
    """A built-in workload run natively needs its framework in this interpreter."""
    import importlib.util
    import sys

    from launcher.frameworks import get as get_framework

    fw = get_framework(framework)
    if fw.needed and importlib.util.find_spec(fw.module) is None:
        raise LauncherError(f"{workload} needs {fw.module}, which is not installed for "
                            f"{sys.executable}: pip install {fw.install!r} (or run it in an "
                            f"image that has it: --image IMG)")


def check_limits(engine: Engine, spec: RunSpec, tell: Teller) -> None:
    """Before the start: each limit the engine cannot have the kernel enforce here, and why;
    with --require-limits or the profile's limits.require (the spec's `required_by`), a
    refusal instead (nothing started, no run folder). The engine refuses too, should the
    kernel's answer change by the start."""
    preview = engine.preview(spec)
    if preview.advisory and spec.required_by:
        raise LauncherError(preview.refusal(spec.required_by))
    if preview.advisory:
        tell.warn(preview.shortfall())


def why_no_container() -> str:
    """Why the container engines `--runtime auto` passed over do not answer (a socket this
    user may not open is no stopped daemon)."""
    from launcher.runtime.engines import auto_order, get_engine

    reasons = []
    for name in auto_order():
        engine = get_engine(name)
        if not engine.runs_host_processes:
            try:
                engine.ping()
            except LauncherError as exc:
                reasons.append(str(exc))
    return f" ({'; '.join(reasons)})" if reasons else ""

