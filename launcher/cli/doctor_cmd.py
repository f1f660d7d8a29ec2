"""`launcher doctor`: the doctor use case's findings (launcher/usecases/doctor.py) as a table
for people, or JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING

from launcher.cli.declare import JSON, command
from launcher.cli.output import print_json, table
from launcher.units import format_size
from launcher.usecases.doctor import DoctorRequest

if TYPE_CHECKING:
    from launcher.usecases.doctor import HostFacts


def _at(facts: HostFacts, controller: str) -> str:
    where = facts.cgroup.binding.get(controller)
    return f" (set at {facts.host_path(where)})" if where else ""


def _lim(v: int | None) -> str:
    return "unlimited" if v is None else str(v)


def doctor(req: DoctorRequest, *, as_json: bool) -> int:
    from launcher.usecases.doctor import doctor as diagnose

    got = diagnose(req)
    if got.captured is not None:
        print(f"captured {len(got.captured)} files into {req.capture}; read them back with "
              f"`launcher doctor --host-root {req.capture}`")
        return 0
    report, facts = got.report, got.facts
    assert facts is not None
    if as_json:
        print_json(report)
        return 0
    cg = facts.cgroup
    rl = facts.rlimits
    quota = "none" if cg.cpu_quota is None else f"{cg.cpu_quota:g}{_at(facts, 'cpu')}"
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
        print("left behind by killed runs:" if not req.clean else "removed:")
        for x in report["leftovers"]:
            failed = f": {x['state']}" if req.clean and x["state"] != "removed" else ""
            print(f"  - {x['engine']} {x['kind']} {x['id']} ({x['detail']}){failed}")
        if not req.clean:
            print("  remove them with `launcher doctor --clean`")
    elif req.clean:
        print("nothing left behind by earlier runs")
    if req.profile:
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


COMMAND = command("doctor", DoctorRequest, doctor, own=(JSON,), help="""Report this host's real
limits (cgroup, rlimits, kernel, GPUs), the one that will bite first, stale thread variables
inherited from the shell, and anything killed runs left.""")
