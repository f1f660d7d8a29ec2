"""`launcher plan`: the plan use case's caps (launcher/usecases/plan.py) in words or JSON."""

from __future__ import annotations

from typing import Any

from launcher.cli.declare import DETAILED, JSON, command
from launcher.cli.output import print_json, table, verdict_status
from launcher.units import format_rlimit, format_size
from launcher.usecases.plan import PlanRequest


def plan(req: PlanRequest, *, as_json: bool = False, detailed: bool = False) -> int:
    from launcher.usecases.plan import plan as resolve_plan

    got = resolve_plan(req)
    data = got.data
    if as_json:
        print_json(data)
        return verdict_status(data["verdict"]["level"], detailed)
    print(f"plan: profile {data['profile']}, framework {data['framework']}, "
          f"{data['processes']} process(es), pools sized for {data['cpus']} CPU(s)")
    if got.fitted:
        print(got.fitted)
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
    return verdict_status(data["verdict"]["level"], detailed)


def _fmt_limit(name: str, value: Any) -> str:
    if value is None:
        return "-"
    return format_size(value) if name in ("memory", "shm") else str(value)


def print_verdict(data: dict[str, Any]) -> None:
    from launcher.usecases.plan import threads_in_all

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


COMMAND = command("plan", PlanRequest, plan, own=(DETAILED, JSON), help="""Resolve a profile
against this host: every variable with its source, the ulimits and container limits, the
thread estimate, and a verdict (ok, warn, refuse). When the threads would not fit the pids
budget, it names the largest pool size that does (--fit applies it).""")
