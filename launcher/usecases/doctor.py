"""`launcher doctor`: this host's real limits, the first to bite, stale variables, the
frameworks installed, and what killed runs left behind (removed, when asked); or the files the
probe reads, captured into a folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.errors import LauncherError
from launcher.flags import VISIBLE_HOST_ROOT, Flag, flag
from launcher.probe import HostFacts

__all__ = ["DoctorRequest", "DoctorResult", "HostFacts", "doctor"]


@dataclass(frozen=True, kw_only=True)
class DoctorRequest:
    profile: str | None = flag(Flag(("--profile", "-p"), "Also judge this profile here."))
    capture: Path | None = flag(Flag(
        ("--capture",), "Copy the files the probe reads into DIR (for a bug report or a test "
        "fixture; read it back with --host-root DIR).", kind="path", metavar="DIR"))
    clean: bool = flag(Flag(("--clean",), "Remove what killed launcher runs left behind "
                                          "(containers, run cgroups).", kind="bool"), False)
    host_root: Path | None = flag(VISIBLE_HOST_ROOT)


@dataclass(frozen=True, kw_only=True)
class DoctorResult:
    facts: HostFacts | None = None
    report: dict[str, Any]  # --json: host, pool_cpus, frameworks, first_limit, warnings, ...
    captured: list[str] | None = None  # the files copied, with `capture`


def doctor(req: DoctorRequest) -> DoctorResult:
    from launcher.probe import probe_host

    if req.capture is not None:
        from launcher.probe.capture import capture as copy_tree

        files = copy_tree(req.capture, req.host_root or Path("/"))
        return DoctorResult(report={}, captured=[str(f) for f in files])
    facts = probe_host(req.host_root or "/")
    report = diagnose(facts, req.profile)
    report["leftovers"] = leftovers(clean=req.clean) if req.host_root is None else []
    return DoctorResult(facts=facts, report=report)


def diagnose(facts: HostFacts, profile_ref: str | None) -> dict[str, Any]:
    from launcher.caps.load import load_and_resolve
    from launcher.caps.sizing import pool_cpus
    from launcher.frameworks import names as framework_names
    from launcher.profiles.schema import AUTO
    from launcher.variables import verdict_says

    r = load_and_resolve(profile_ref or "auto", facts=facts)
    caps = r.caps
    warnings = []
    for name, s in caps.env.items():
        if s.replaced is not None and not verdict_says(name, s.value):
            new = "removed" if s.value is None else f"set to {s.value}"
            warnings.append(f"{name}={s.replaced} inherited from the shell; under profile "
                            f"{r.profile.name} launcher replaces it ({new}, {s.source}).")
    if not profile_ref:  # with --profile, the verdict lists them
        warnings += [x for x in caps.verdict.reasons if x not in warnings]
    pools = {fw: pool_cpus(fw, facts, AUTO)[0] for fw in framework_names()}
    out: dict[str, Any] = {"host": facts.to_json(), "pool_cpus": pools,
                           "frameworks": frameworks(facts), "first_limit": caps.budget.to_json(),
                           "warnings": warnings}
    if profile_ref:
        out["plan"] = caps.to_json()
    return out


def frameworks(facts: HostFacts) -> dict[str, dict[str, Any]]:
    """Each framework as installed here (a live host only): version, build, whether the thread
    model was measured on that version, and its facts."""
    from launcher.caps.resolve import installed_here
    from launcher.frameworks import get
    from launcher.frameworks import names as framework_names

    out = {}
    for name in framework_names():
        fw, got = get(name), installed_here(name, facts)
        measured = next((m.measured for m in fw.models if m.covers(got.version)), None)
        out[name] = {"label": fw.label, "version": got.version, "build": got.build,
                     "model": measured, "facts": list(fw.facts)}
    return out


def leftovers(*, clean: bool) -> list[dict[str, str]]:
    """What killed launcher runs left behind, from every engine that answers; removed with
    `clean`."""
    from launcher.runtime.engines import get_engine, names, sweep_leftovers

    found = []
    for name in names():
        try:
            swept = sweep_leftovers(get_engine(name), everything=clean)
        except LauncherError:  # an engine that does not answer holds nothing we can see
            continue
        found += [{"engine": name, "kind": item.kind, "id": item.ident, "detail": item.detail,
                   "state": state} for item, state in swept]
    return found
