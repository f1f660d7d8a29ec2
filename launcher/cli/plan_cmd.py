"""`launcher plan`: a profile resolved against this host."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from launcher.caps.model import threads_in_all
from launcher.cli.common import fit_or_advise, resolve_profile
from launcher.cli.output import print_json, table
from launcher.units import format_rlimit, format_size


def plan(profile_ref: str, *, framework: str | None = None, processes: int | None = None,
         env_pairs: list[str] | None = None, gpus: str | None = None,
         workload: str | None = None, as_json: bool = False, host_root: Path | None = None,
         fit: bool = False) -> int:
    """The caps `launcher run` would use here: the same resolve, with a workload's framework
    and its own threads when `workload` names one, so plan and run give the same verdict."""
    extra = 0
    if workload is not None:
        from launcher.workloads.catalog import find_workload

        w = find_workload(workload)
        framework, extra = framework or w.framework, w.extra_threads
    r, fitted = fit_or_advise(resolve_profile(profile_ref, framework=framework,
                                              processes=processes, env_pairs=env_pairs,
                                              gpus=gpus, host_root=host_root, clamp=True,
                                              extra_threads=extra), fit)
    caps = r.caps
    data = caps.to_json()
    if fitted:
        data["fit"] = fitted
    if as_json:
        print_json(data)
        return 0
    print(f"plan: profile {caps.profile}, framework {caps.framework}, {caps.processes} "
          f"process(es), pools sized for {caps.cpus} CPU(s)")
    if fitted:
        print(fitted)
    print("environment (set before the interpreter starts):")
    rows = []
    for name, s in data["env"].items():
        value = "(removed)" if s["value"] is None else s["value"]
        note = s["source"] + (f"; replaces inherited {s['replaced']!r}" if s["replaced"] else "")
        rows.append((name, value, note))
    print(table(rows))
    print("ulimits as `launcher run` sets them on this host (soft/hard):")
    print(table([(n, f"{format_rlimit(n, u['soft'])}/{format_rlimit(n, u['hard'])}",
                  u["source"])
                 for n, u in data["ulimits"].items()]))
    print("container limits:")
    print(table([(n, _fmt_limit(n, lim["value"]), lim["source"])
                 for n, lim in data["limits"].items()]))
    print_verdict(data)
    return 0


def _fmt_limit(name: str, value: Any) -> str:
    if value is None:
        return "-"
    return format_size(value) if name in ("memory", "shm") else str(value)


def print_verdict(data: dict[str, Any]) -> None:
    est, budget = data["estimate"], data["budget"]
    parts = " + ".join(f"{k} {v}" for k, v in est["breakdown"].items())
    print(f"threads at their peak: {threads_in_all(est)}; budget {budget['available']} "
          f"({budget['binding']})")
    print(f"  per process: {parts}")
    if est.get("source"):
        print(f"  estimate: {est['source']}")
    for note in budget.get("notes", ()):
        print(f"  note: {note}")
    v = data["verdict"]
    print(f"verdict: {v['level'].upper()}")
    for r in v["reasons"]:
        print(f"  - {r}")
