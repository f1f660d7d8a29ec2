"""The verdict on one scenario, from the kernel's counters the guest recorded.

Outcomes (first that applies):
- `error` / `timeout`: the lab itself failed (setting the layout up, putting the caller in
  place: enter.sh's exit 97/98) or the scenario ran past its time;
- `refused`: launcher exited non-zero and the workload never started (no start mark);
- `escaped`: the workload got more than a limit its caller was under before: the bomb started
  as many threads as the caller's pids.max, or the hog reached the caller's memory.max, or the
  run's cgroup sits outside a limit that held the caller (the strictest pids.max / memory.max /
  cpu.max over the workload's cgroup and its ancestors is looser than over the caller's);
- `ran`: nothing was asked for (the control) and nothing escaped;
- `enforced`: every limit asked for held, by the kernel's counters: the bomb stopped below the
  pids limit with a `pids.events` max counted; the hog was OOM-killed below the memory limit
  (`memory.events` oom_kill, or an `oom-kill:` line in dmesg); the busy loop was throttled
  (`nr_throttled` > 0, CPU/wall <= 0.6). A limit the workload does not exercise (the CPU limit
  under the bomb or the hog) holds when the kernel's own limit over the workload is at most it;
- `advisory`: a limit did not hold and launcher said it was advisory;
- `unenforced`: a limit did not hold and launcher did not say so.
Standard library only (the guest uses it for its progress lines).
"""

from __future__ import annotations

from typing import Any

from tests.lab.spec import LAYOUTS

MIB = 1024 * 1024
CPU_RATIO_MAX = 0.6  # a 0.5 CPU quota with some slack for HZ 100
ENTER_FAILED = (97, 98)  # guest.ENTER_SH's exits: the caller could not be put in place


def _num(x: Any) -> float | None:
    return None if x is None else float(x)


def rises(rec: dict[str, Any], key: str) -> dict[str, int]:
    """cgroup -> how much `key` rose between `before` and any later reading (while the
    workload ran, at its end, or after); a cgroup made during the run starts at 0."""
    before = rec.get("before") or {}
    out: dict[str, int] = {}
    for phase in ("polled", "during", "after"):
        for d, c in (rec.get(phase) or {}).items():
            delta = int(c.get(key, 0)) - int((before.get(d) or {}).get(key, 0))
            if delta > out.get(d, 0):
                out[d] = delta
    return out


def facts(rec: dict[str, Any]) -> dict[str, Any]:
    """What the workload did and what the kernel counted, in one flat dict."""
    lines = list(rec.get("workload_lines") or [])
    end = rec.get("end_mark")
    result = end or (lines[-1] if lines else {})
    reached = max([int(x.get("reached_mib", 0)) for x in [*lines, end or {}]] or [0])
    dmesg = list(rec.get("dmesg_oom") or [])
    memcgs = sorted({part.split("=", 1)[1] for line in dmesg for part in line.split(",")
                     if part.startswith("oom_memcg=")})
    stat = (result.get("cpu_stat") or {}) if rec.get("workload") == "busy" else {}
    return {
        "ran": rec.get("started") is not None,
        "placed": (rec.get("started") or {}).get("placed"),
        "threads": result.get("started") if rec.get("workload") == "bomb" else None,
        "reached_mib": reached if rec.get("workload") == "hog" else None,
        "hog_done": bool(result.get("done")) if rec.get("workload") == "hog" else None,
        "ratio": result.get("ratio") if rec.get("workload") == "busy" else None,
        "own_nr_throttled": stat.get("nr_throttled") if isinstance(stat, dict) else None,
        "pids_ev": rises(rec, "pids_max_ev"),
        "oom_kill": rises(rec, "oom_kill"),
        "throttled": rises(rec, "nr_throttled"),
        "dmesg_oom_kills": sum("oom-kill:" in line for line in dmesg),
        "oom_memcg": memcgs,
        "caller_limits": rec.get("caller_limits") or {},
        "workload_limits": rec.get("workload_limits"),
    }


def _show(value: float | None, cap: str) -> str:
    if value is None:
        return "none"
    return f"{value / MIB:g} MiB" if cap == "memory" else f"{value:g}"


def _looser(run: float | None, caller: float) -> bool:
    return run is None or run > caller + 1e-9


def escapes(rec: dict[str, Any], f: dict[str, Any]) -> list[str]:
    """How the workload got out from under a limit its caller was under."""
    out: list[str] = []
    caller = f["caller_limits"]
    pids, mem = _num(caller.get("pids")), _num(caller.get("memory"))
    if f["threads"] is not None and pids is not None and f["threads"] >= pids:
        out.append(f"bomb started {f['threads']} threads; the caller was under pids.max "
                   f"{pids:g}")
    if f["reached_mib"] is not None and mem is not None and f["reached_mib"] * MIB >= mem:
        out.append(f"hog reached {f['reached_mib']} MiB; the caller was under memory.max "
                   f"{mem / MIB:g} MiB")
    run = f["workload_limits"]
    if run is not None and f["placed"] is not None:
        for k, v in caller.items():
            if v is not None and _looser(_num(run.get(k)), float(v)):
                out.append(f"run cgroup /{f['placed']} is outside the caller's {k} limit "
                           f"({_show(v, k)}; over the run: {_show(run.get(k), k)})")
    return out


def held(rec: dict[str, Any], f: dict[str, Any]) -> dict[str, bool]:
    """Per limit asked for: did the kernel hold the workload to it."""
    out: dict[str, bool] = {}
    run = f["workload_limits"] or {}
    work = rec.get("workload")
    for cap, want in (rec.get("asks") or {}).items():
        in_force = _num(run.get(cap))
        within = f["ran"] and in_force is not None and in_force <= float(want) + 1e-9
        if not f["ran"]:
            out[cap] = False
        elif cap == "pids" and work == "bomb":
            out[cap] = (bool(within) and f["threads"] is not None and f["threads"] < want
                        and any(v > 0 for v in f["pids_ev"].values()))
        elif cap == "memory" and work == "hog":
            killed = any(v > 0 for v in f["oom_kill"].values()) or f["dmesg_oom_kills"] > 0
            out[cap] = killed and (f["reached_mib"] or 0) * MIB < want
        elif cap == "cpus" and work == "busy":
            throttled = (f["own_nr_throttled"] or 0) > 0 or \
                any(v > 0 for v in f["throttled"].values())
            out[cap] = throttled and f["ratio"] is not None and f["ratio"] <= CPU_RATIO_MAX
        else:  # a limit this workload does not exercise: the kernel's limit over it
            out[cap] = bool(within)
    return out


def said_advisory(rec: dict[str, Any]) -> bool:
    engine = (rec.get("summary") or {}).get("engine") or {}
    text = f"{rec.get('stderr', '')}\n{rec.get('stdout', '')}".lower()
    return bool(engine.get("advisory")) or "advisory" in text


def leftover_problems(rec: dict[str, Any]) -> list[str]:
    left = rec.get("leftovers")
    if left is None:
        return []
    out = [f"new cgroup /{d}" for d in left.get("new_dirs", [])]
    # The caller's own cgroup must be as it was (else nothing can join it). Above it, a
    # controller launcher enabled stays on, as runc leaves it (turning it off could strip a
    # limit from another run): only a controller taken away there is a problem. The root is
    # exempt from the no-internal-process rule, so it counts as "above".
    caller = next((lay.caller for lay in LAYOUTS if lay.name == rec.get("layout")), None)
    for d, (a, b) in left.get("subtree_changed", {}).items():
        if d == caller and d != "":
            out.append(f"subtree_control of the caller's /{d}: {a!r} -> {b!r}")
        elif set(a.split()) - set(b.split()):
            out.append(f"subtree_control of /{d} lost {sorted(set(a.split()) - set(b.split()))}")
    out += [f"processes left in /{d}: {' '.join(p)}" for d, p in left.get("procs_left", {}).items()]
    if not left.get("join_ok", True):
        out.append(f"cannot join the caller's cgroup again: {left.get('join_error', '')}")
    return out


def expected(rec: dict[str, Any]) -> str:
    """The target rule's outcome for this scenario: a limit asked for is enforced where the
    layout allows it, else advisory, or refused with --require-limits; nothing escapes."""
    if not rec.get("asks"):
        return "ran"
    if rec.get("expect") == "advisory":
        return "refused" if rec.get("require") else "advisory"
    return "enforced"


def judge(rec: dict[str, Any]) -> dict[str, Any]:
    if rec.get("error") or rec.get("setup_error"):
        return {"outcome": "error", "why": rec.get("error") or rec.get("setup_error")}
    if rec.get("rc") in ENTER_FAILED and rec.get("started") is None:
        return {"outcome": "error", "why": "the lab could not put the caller in place: "
                + str(rec.get("stderr", ""))[-300:]}
    f = facts(rec)
    esc = escapes(rec, f)
    ok = held(rec, f)
    if rec.get("timed_out"):
        outcome = "timeout"
    elif not f["ran"]:
        outcome = "refused" if rec.get("rc") not in (0, None) else "not-run"
    elif esc:
        outcome = "escaped"
    elif not ok:
        outcome = "ran"
    elif all(ok.values()):
        outcome = "enforced"
    elif said_advisory(rec):
        outcome = "advisory"
    else:
        outcome = "unenforced"
    return {"outcome": outcome, "held": ok, "escapes": esc, "facts": f,
            "leftovers": leftover_problems(rec), "said_advisory": said_advisory(rec)}


# ---- short forms for the progress lines and the table ---------------------------------------
# In cells, C is the caller's cgroup and RUN the run's own (launcher-PID-RUNID).

def short(path: str, rec: dict[str, Any]) -> str:
    """A cgroup path for a cell: C for the caller's cgroup, RUN for the run's."""
    path = "/" + path.strip("/")
    placed = ((rec.get("started") or {}).get("placed") or "").strip("/")
    run = placed.rsplit("/", 1)[-1]
    if run.startswith("launcher-") and run != "launcher-leaf":
        path = path.replace(run, "RUN")
    caller = "/" + str(rec.get("caller", "")).strip("/")
    if caller != "/" and (path == caller or path.startswith(caller + "/")):
        path = "C" + path[len(caller):]
    return path


def _brief(path: str, rec: dict[str, Any]) -> str:
    """`short`, or only the last name when that is still long (a deep delegated tree)."""
    out = short(path, rec)
    return out if len(out) <= 24 else out.rsplit("/", 1)[-1]


def workload_cell(rec: dict[str, Any]) -> str:
    f = (rec.get("verdict") or {}).get("facts") or {}
    if not f.get("ran"):
        return "not run"
    if rec.get("workload") == "bomb":
        return f"{f.get('threads')}/{rec.get('arg')} thr"
    if rec.get("workload") == "hog":
        return f"{f.get('reached_mib')}MiB" + ("" if f.get("hog_done") else " killed")
    return f"cpu/wall {f.get('ratio')}"


def _rose(d: dict[str, int] | None, rec: dict[str, Any]) -> str:
    d = {k: v for k, v in (d or {}).items() if v}
    return ",".join(f"{short(k, rec)}+{v}" for k, v in d.items()) if d else "-"


def counters_cell(rec: dict[str, Any]) -> dict[str, str]:
    f = (rec.get("verdict") or {}).get("facts") or {}
    oom = f.get("oom_kill") or {}
    rose = [k for k, v in oom.items() if v]
    parts = [f"ev:{short(max(rose, key=len), rec)}" + (f"(+{len(rose) - 1} up)"
                                                      if len(rose) > 1 else "")] if rose else []
    if f.get("dmesg_oom_kills"):
        memcgs = ",".join(short(m, rec) for m in f.get("oom_memcg") or [])
        parts.append(f"dmesg:{f['dmesg_oom_kills']}" + (f"@{memcgs}" if memcgs else ""))
    return {"pids.events": _rose(f.get("pids_ev"), rec), "oom_kill": " ".join(parts) or "-",
            "nr_throttled": _rose(f.get("throttled"), rec),
            "placed": short(f["placed"], rec) if f.get("placed") is not None else "-"}


def leftovers_cell(rec: dict[str, Any]) -> str:
    left = rec.get("leftovers")
    if left is None:
        return "?"
    parts = [f"+{_brief(d, rec)}" for d in left.get("new_dirs", [])]
    parts += [f"sc({_brief(d, rec)}:{b or '-'})"
              for d, (_a, b) in left.get("subtree_changed", {}).items()]
    if left.get("procs_left"):
        parts.append("procs:" + ",".join(short(d, rec) for d in left["procs_left"]))
    if not left.get("join_ok", True):
        parts.append("join:FAIL")
    return " ".join(parts) or "clean"


def progress_line(rec: dict[str, Any]) -> str:
    v = rec.get("verdict") or {}
    c = counters_cell(rec)
    return (f"{rec.get('layout', ''):<17} {rec.get('scenario', ''):<20} -> "
            f"{v.get('outcome', '?'):<10} rc={rec.get('rc')} {workload_cell(rec)}; "
            f"pids.ev {c['pids.events']}; oom {c['oom_kill']}; thr {c['nr_throttled']}; "
            f"at {c['placed']}; left {leftovers_cell(rec)} ({rec.get('seconds', '?')}s)")
