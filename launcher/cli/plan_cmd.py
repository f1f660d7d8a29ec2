"""`launcher plan`: a profile resolved against this host."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from launcher.cli.common import fit_or_advise, resolve_profile
from launcher.cli.output import print_json, table
from launcher.units import format_rlimit, format_size


def plan(profile_ref: str, framework: str | None, processes: int | None,
         env_pairs: list[str] | None, as_json: bool, host_root: Path | None,
         fit: bool = False) -> int:
    r, fitted = fit_or_advise(resolve_profile(profile_ref, framework, processes, env_pairs,
                                              host_root=host_root, clamp=True), fit)
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
    extra = f" + {est['extra']} of the workload's own" if est.get("extra") else ""
    print(f"threads at their peak: ~{est['per_process']} per process ({parts}); "
          f"{est['total']} in all (+1 supervisor{extra}); budget {budget['available']} "
          f"({budget['binding']})")
    if est.get("source"):
        print(f"  estimate: {est['source']}")
    for note in budget.get("notes", ()):
        print(f"  note: {note}")
    v = data["verdict"]
    print(f"verdict: {v['level'].upper()}")
    for r in v["reasons"]:
        print(f"  - {r}")
