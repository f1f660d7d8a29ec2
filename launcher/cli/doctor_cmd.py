"""`launcher doctor`: this host's real limits, the first to bite, and stale variables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from launcher.caps.resolve import resolve
from launcher.caps.sizing import pool_cpus
from launcher.cli.output import print_json, table
from launcher.errors import LauncherError
from launcher.frameworks import names as framework_names
from launcher.probe import HostFacts, probe_host
from launcher.profiles import load_profile
from launcher.profiles.schema import AUTO
from launcher.units import format_size
from launcher.variables import verdict_says


def _at(facts: HostFacts, controller: str) -> str:
    where = facts.cgroup.binding.get(controller)
    return f" (set at {facts.host_path(where)})" if where else ""


def _lim(v: int | None) -> str:
    return "unlimited" if v is None else str(v)


def diagnose(facts: HostFacts, profile_ref: str | None) -> dict[str, Any]:
    profile = load_profile(profile_ref or "auto")
    caps = resolve(profile, facts, inherited=facts.env).caps
    warnings = []
    for name, s in caps.env.items():
        if s.replaced is not None and not verdict_says(name, s.value):
            new = "removed" if s.value is None else f"set to {s.value}"
            warnings.append(f"{name}={s.replaced} inherited from the shell; under profile "
                            f"{profile.name} launcher replaces it ({new}, {s.source}).")
    if not profile_ref:  # with --profile, the verdict lists them
        warnings += [r for r in caps.verdict.reasons if r not in warnings]
    pools = {fw: pool_cpus(fw, facts, AUTO)[0] for fw in framework_names()}
    out: dict[str, Any] = {"host": facts.to_json(), "pool_cpus": pools,
                           "frameworks": frameworks(facts), "first_limit": caps.budget,
                           "warnings": warnings}
    if profile_ref:
        out["plan"] = caps.to_json()
    return out


def frameworks(facts: HostFacts) -> dict[str, dict[str, Any]]:
    """Each framework as installed here (a live host only): version, build, whether the thread
    model was measured on that version, and its facts."""
    from launcher.caps.resolve import installed_here
    from launcher.frameworks import get

    out = {}
    for name in framework_names():
        fw, got = get(name), installed_here(name, facts)
        measured = next((m.measured for m in fw.models if m.covers(got.version)), None)
        out[name] = {"label": fw.label, "version": got.version, "build": got.build,
                     "model": measured, "facts": list(fw.facts)}
    return out


def leftovers(clean: bool) -> list[dict[str, str]]:
    """What killed launcher runs left behind, from every engine that answers; removed with
    `clean`."""
    from launcher.runtime.engines import get_engine, names

    found = []
    for name in names():
        engine = get_engine(name)
        try:
            items = engine.leftovers()
        except LauncherError:
            continue
        for item in items:
            state = "left behind"
            if clean:
                engine.remove(item)
                state = "removed"
            found.append({"engine": name, "kind": item.kind, "id": item.ident,
                          "detail": item.detail, "state": state})
    return found


def doctor(as_json: bool, profile_ref: str | None, host_root: Path | None,
           capture: Path | None = None, clean: bool = False) -> int:
    if capture is not None:
        from launcher.probe.capture import capture as copy_tree

        files = copy_tree(capture, host_root or Path("/"))
        print(f"captured {len(files)} files into {capture}; read them back with "
              f"`launcher doctor --host-root {capture}`")
        return 0
    facts = probe_host(host_root or "/")
    report = diagnose(facts, profile_ref)
    report["leftovers"] = leftovers(clean) if host_root is None else []
    if as_json:
        print_json(report)
        return 0
    cg = facts.cgroup
    rl = facts.rlimits
    quota = "none" if cg.cpu_quota is None else f"{cg.cpu_quota:g}"
    dirs = [f"{k}: {facts.host_path(v)}" for k, v in cg.dirs.items()]
    rows = [
        ("CPUs", f"{facts.online_cpus} online, {facts.affinity_cpus} in affinity, cpuset "
                 f"{cg.cpuset_cpus or '-'}, quota {quota} -> {facts.effective_cpus} effective"),
        ("pools", "sized for " + ", ".join(f"{fw} {n}" for fw, n in report["pool_cpus"].items())
         + " CPU(s) (quota rounded down for OpenBLAS and JAX, half up for torch and TF)"),
        ("cgroup", f"{cg.version} ({', '.join(dirs) or '-'})"),
        ("pids", _pids(facts) if "pids" in cg.dirs
         else "no pids controller on this cgroup or above it"),
        ("memory", f"limit {format_size(cg.memory_limit) if cg.memory_limit else 'none'}"
                   f"{_at(facts, 'memory')}, usage "
                   f"{format_size(cg.memory_usage) if cg.memory_usage else '-'}, OOM kills "
                   f"{cg.oom_kills if cg.oom_kills is not None else '-'}"
         if "memory" in cg.dirs else "no memory controller on this cgroup or above it"),
    ]
    for name in ("nproc", "nofile", "stack", "as"):
        if name in rl:
            r = rl[name]
            fmt = _size if name in ("stack", "as") else _lim
            rows.append((f"RLIMIT_{name.upper()}", f"soft {fmt(r.soft)}, hard {fmt(r.hard)}"))
    if facts.uid is not None:
        rows.append(("tasks", f"{facts.uid_tasks} of UID {facts.uid} (RLIMIT_NPROC counts "
                              f"these)" if facts.uid_tasks is not None else
                              f"UID {facts.uid}'s not counted: RLIMIT_NPROC does not bind it "
                              f"(the kernel exempts it)"))
    running = ("tasks running unknown (no /proc/loadavg here)" if facts.tasks is None
               else f"{facts.tasks} tasks running (threads-max and pid_max count them)")
    rows.append(("kernel", f"threads-max {_known(facts.threads_max)}, pid_max "
                           f"{_known(facts.pid_max)}, vm.max_map_count "
                           f"{_known(facts.max_map_count)}; {running}"))
    if facts.mem_total:
        rows.append(("RAM", f"{format_size(facts.mem_total)} total, "
                            f"{format_size(facts.mem_available or 0)} available"))
    for f in report["frameworks"].values():
        if f["version"] is None:
            continue  # not installed here (or a captured tree)
        model = (f"thread model measured on it ({f['model']})" if f["model"] else
                 "a version the thread model was not measured on: estimates err high "
                 "(`launcher calibrate` measures it)")
        rows.append((f["label"], f"{f['version']}, {f['build']} build; {model}; "
                                 + "; ".join(f["facts"])))
    gpus = ", ".join(f"{g.vendor} {g.index}: {g.model}" for g in facts.gpus) or "none found"
    rows.append(("GPUs", gpus))
    first = report["first_limit"]
    rows.append(("first limit", f"{first['binding']}: {first['available']} tasks available"
                 if first["available"] is not None else "none found"))
    print(table(rows, indent=""))
    if report["warnings"]:
        print("warnings:")
        for w in report["warnings"]:
            print(f"  - {w}")
    if report["leftovers"]:
        print("left behind by killed runs:" if not clean else "removed:")
        for x in report["leftovers"]:
            print(f"  - {x['engine']} {x['kind']} {x['id']} ({x['detail']})")
        if not clean:
            print("  remove them with `launcher doctor --clean`")
    elif clean:
        print("nothing left behind by earlier runs")
    if profile_ref:
        from launcher.cli.plan_cmd import print_verdict

        print_verdict(report["plan"])
    return 0


def _pids(facts: HostFacts) -> str:
    """The pids cgroup's limit and count, in words where either is missing."""
    cg = facts.cgroup
    if cg.pids_current is not None:
        return f"max {_lim(cg.pids_max)}{_at(facts, 'pids')}, current {cg.pids_current}"
    if cg.pids_max is None:
        return "no limit (pids.current not readable here)"
    return f"max {cg.pids_max}{_at(facts, 'pids')}; pids.current not readable here"


def _known(v: int | None) -> str:
    return "-" if v is None else str(v)


def _size(v: int | None) -> str:
    return "unlimited" if v is None else format_size(v)
