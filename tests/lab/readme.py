"""The enforcement table of the docs (`PAGE`), made from a lab run: one row per caller layout,
each cell the outcome the kernel's counters showed (never launcher's own words), in words that do
not change from run to run. `scripts/cgroup2-lab.py --readme` writes it between the markers; the
lab's test checks that the page holds exactly what the lab it just ran says."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.lab.spec import BY_NAME, LAYOUTS, MIB

PAGE = "docs/cgroup-v2.md"  # relative to the repository's root
BEGIN, END = "<!-- cgroup2-lab:begin -->", "<!-- cgroup2-lab:end -->"
HEAD = ("| # | where the caller is | the run's cgroup | pids 40 (thread bomb) | memory 200MiB "
        "(hog) | cpus 0.5 (busy loop) | only cpus 0.5 asked: the caller's own limits | "
        "--require-limits |\n|---|---|---|---|---|---|---|---|")


def _rec(recs: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    return next((r for r in recs if r.get("scenario") == key), None)


def _outcome(rec: dict[str, Any] | None) -> str:
    return (rec.get("verdict") or {}).get("outcome", "?") if rec else "not run"


def _cell(rec: dict[str, Any] | None, enforced: str) -> str:
    out = _outcome(rec)
    if out == "enforced":
        return f"enforced: {enforced}"
    if out == "advisory":
        return "advisory, said before the start"
    return out


def _placed(rec: dict[str, Any] | None) -> str:
    placed = (((rec or {}).get("summary") or {}).get("engine") or {}).get("cgroup", {})
    first = (placed.get("placed") or [{}])[0]
    mode = first.get("mode")
    if mode is None:
        return "none (advisory)"
    where = {"root": "a child of the root", "own": "a child of the caller's",
             "leaf": "a child of the caller's, launcher moved into `launcher-leaf` (undone "
                     "at the end)",
             "beside": "beside the caller's, under its parent"}[mode]
    carried = sorted(first.get("carried") or {})
    return where + (f", carrying {', '.join(f'`{c}`' for c in carried)}" if carried else "")


def _kept(recs: list[dict[str, Any]], layout: str) -> str:
    """The escape check: only a CPU quota asked for, the caller under limits of its own; the
    verdict has checked that the strictest limits over the run are still at least as tight
    and that the bomb and the hog stayed under them."""
    bomb, hog = _rec(recs, "cpu05/bomb"), _rec(recs, "cpu05/hog")
    caller = (bomb or {}).get("caller_limits") or {}
    if _outcome(bomb) == "escaped" or _outcome(hog) == "escaped":
        return "**escaped**"
    kept = []
    if caller.get("pids"):
        kept.append(f"pids.max {caller['pids']:g}")
    if caller.get("memory"):
        kept.append(f"memory.max {caller['memory'] / MIB:g}M")
    return ("kept: " + ", ".join(kept) + " still over the run") if kept else \
        "none above the caller"


def _require(recs: list[dict[str, Any]]) -> str:
    outs = {_outcome(r) for r in recs if r.get("require")}
    if outs == {"enforced"}:
        return "runs: every limit enforced"
    if outs == {"refused"}:
        return "refused: exit 1, nothing ran"
    return ", ".join(sorted(outs))


def table(data: dict[str, Any]) -> str:
    rows = [HEAD]
    for lay in LAYOUTS:
        recs = [r for r in data["records"] if r.get("layout") == lay.name]
        if not recs:
            continue
        rows.append(" | ".join([
            f"| {lay.number}", BY_NAME[lay.name].what,
            _placed(_rec(recs, "pids40/bomb")),
            _cell(_rec(recs, "pids40/bomb"), "stopped below 40, `pids.events` max rose"),
            _cell(_rec(recs, "mem200/hog"), "OOM-killed below 200MiB (`memory.events`, "
                                            "the kernel log)"),
            _cell(_rec(recs, "cpu05/busy"), "throttled to half a CPU (`cpu.stat` "
                                            "nr_throttled)"),
            _kept(recs, lay.name), _require(recs)]) + " |")
    extras = data.get("extras") or []
    if extras:
        rows.append("")
        rows += [f"- `{x['extra']}`: " + ("as it must be" if not x["problems"] else
                                           "**" + "; ".join(x["problems"]) + "**")
                 for x in extras]
    return "\n".join(rows)


def complete(data: dict[str, Any]) -> bool:
    """A run of every layout, scenario and extra (a subset must not rewrite the table)."""
    from tests.lab.spec import scenarios

    return (len(data["records"]) == len(LAYOUTS) * len(scenarios())
            and len(data.get("extras") or []) >= 6)


def in_readme(path: Path) -> str | None:
    m = re.search(re.escape(BEGIN) + r"\n(.*?)\n" + re.escape(END), path.read_text(), re.S)
    return m.group(1) if m else None


def write_readme(path: Path, data: dict[str, Any]) -> None:
    text = path.read_text()
    block = f"{BEGIN}\n{table(data)}\n{END}"
    if BEGIN in text:
        text = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda _m: block, text,
                      flags=re.S)
    else:
        raise ValueError(f"{path} has no {BEGIN} ... {END} block to fill")
    path.write_text(text)

