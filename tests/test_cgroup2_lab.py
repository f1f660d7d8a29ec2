"""launcher's native runs on a real, pure cgroup v2 kernel (user-mode Linux, FIELD.md 35, or
where the host refuses it Debian's kernel under QEMU, FIELD.md 48): one boot runs every
caller layout x limit x --require-limits scenario (tests/lab), and each layout's test
checks the target rule against the kernel's own counters:

- a run never escapes a limit its caller was under (FIELD.md 34);
- a limit asked for is enforced by the kernel where the layout allows it (every layout but
  nothing-delegated); where it cannot be, the run says advisory, and with --require-limits it
  is refused (exit non-zero, the workload never starts);
- nothing is left behind: no new cgroup, every cgroup.subtree_control as it was, and a process
  can join the caller's cgroup again.

Skipped where neither boots (no /usr/bin/linux that runs here, no qemu-system-x86 with
linux-image-amd64 and busybox-static), but failed when CI is set.
CGROUP2_LAB_SRC=DIR runs another launcher tree; CGROUP2_LAB_RESULTS=FILE judges a saved
`scripts/cgroup2-lab.py --json` instead of booting.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.lab import host, qemu, readme, verdict
from tests.lab.spec import BY_NAME, LAYOUTS, MIB

Record = dict[str, Any]


@pytest.fixture(scope="module")
def lab(request: pytest.FixtureRequest) -> dict[str, Any]:
    saved = os.environ.get("CGROUP2_LAB_RESULTS")
    if saved:
        data = json.loads(Path(saved).read_text())
        for rec in data["records"]:
            rec["verdict"] = verdict.judge(rec)
        data["meta"]["saved"] = saved
        return data
    src = Path(os.environ.get("CGROUP2_LAB_SRC", ROOT))
    try:
        data = host.run_lab(src, python=host.default_python(), progress=print)
    except host.LabUnavailable as exc:
        # neither UML nor QEMU: an install step is missing (scripts/test.sh installs both)
        why = f"the cgroup v2 lab cannot boot a kernel here: {exc}"
        print(f"cgroup v2 lab: SKIPPED: {why}")
        if os.environ.get("CI"):
            pytest.fail(f"{why}; CI is set, so this is a failure, not a skip")
        pytest.skip(why)
    except RuntimeError as exc:
        pytest.fail(f"the cgroup v2 lab did not run: {exc}")
    m = data["meta"]
    said = (f"{host.describe(m)}; boot {m.get('boot_seconds')} s, {m['total_seconds']:.0f} s "
            f"for {len(data['records'])} runs and {len(data.get('extras', []))} extras")
    shown = request.config.pluginmanager.get_plugin("terminalreporter")
    if shown is not None:  # on the terminal whatever the capture: which kernel, how booted
        shown.ensure_newline()
        shown.write_line(said)
    keep = os.environ.get("CGROUP2_LAB_SAVE")  # the run, to judge again or make the table
    if keep:  # from (CGROUP2_LAB_RESULTS, `scripts/cgroup2-lab.py --from-json FILE`)
        Path(keep).write_text(json.dumps(data, indent=1))
    timing = os.environ.get("LAUNCHER_LAB_TIME_FILE")  # .ci/run prints it at the end
    if timing:
        Path(timing).write_text(said.removeprefix("cgroup v2 lab: ") + "\n")
    return data


def _ms(value: float | None, cap: str = "") -> str:
    """A limit for a message: none, a count, CPUs, or MiB."""
    if value is None:
        return "none"
    return f"{value / MIB:g} MiB" if cap == "memory" else f"{value:g}"


def kernel_problems(rec: Record) -> list[str]:
    """What the kernel's counters say went against the target rule in one scenario."""
    name = f"{rec['layout']} {rec['scenario']}"
    if rec.get("error") or rec.get("setup_error") or rec.get("timed_out"):
        why = rec.get("error") or rec.get("setup_error") or "timeout"
        return [f"{name}: the lab failed: {why}"]
    f = verdict.facts(rec)
    out: list[str] = []
    caller, run = f["caller_limits"], f["workload_limits"] or {}
    # never escapes: the workload's usage, and the limits over the run's cgroup
    if f["threads"] is not None and caller.get("pids") is not None \
            and f["threads"] >= caller["pids"]:
        out.append(f"{name}: escaped: {f['threads']} threads started, caller under "
                   f"pids.max {caller['pids']}")
    if f["reached_mib"] is not None and caller.get("memory") is not None \
            and f["reached_mib"] * MIB >= caller["memory"]:
        out.append(f"{name}: escaped: hog reached {f['reached_mib']} MiB, caller under "
                   f"memory.max {caller['memory'] // MIB} MiB")
    if f["ran"] and f["placed"] is not None:
        for k, v in caller.items():
            if v is not None and (run.get(k) is None or run[k] > v + 1e-9):
                out.append(f"{name}: escaped: run cgroup /{f['placed']} is outside the caller's "
                           f"{k} limit {_ms(v, k)} (strictest over the run: "
                           f"{_ms(run.get(k), k)})")
    # a limit asked for: enforced, or advisory / refused where the layout cannot
    asks: dict[str, float] = rec.get("asks") or {}
    expect = BY_NAME[rec["layout"]].expect
    if not asks:
        if not f["ran"]:
            out.append(f"{name}: the control run (no limit asked) did not start (rc {rec['rc']})")
    elif expect == "advisory" and rec.get("require"):
        if f["ran"] or rec.get("rc") == 0:
            out.append(f"{name}: --require-limits where no limit can be enforced must refuse "
                       f"(rc {rec.get('rc')}, workload started: {f['ran']})")
    elif expect == "advisory":
        if not f["ran"]:
            out.append(f"{name}: advisory run did not start (rc {rec.get('rc')})")
        elif not verdict.said_advisory(rec):
            out.append(f"{name}: a limit that cannot be enforced must be reported advisory")
    elif not f["ran"]:
        out.append(f"{name}: not run (rc {rec.get('rc')}): {rec.get('stderr', '')[-300:]}")
    else:
        out += _enforced(name, rec, f, asks)
    # nothing left behind: no cgroup, the caller's cgroup as it was (controllers enabled
    # above it stay on, as runc leaves them), no process, and a process can join it again
    if not (rec.get("leftovers") or {}).get("join_ok", False):
        out.append(f"{name}: a process cannot join the caller's cgroup /{rec['caller']} again")
    out += [f"{name}: {p}" for p in verdict.leftover_problems(rec)
            if not p.startswith("cannot join")]
    return out


def _enforced(name: str, rec: Record, f: dict[str, Any], asks: dict[str, float]) -> list[str]:
    out: list[str] = []
    run = f["workload_limits"] or {}
    work = rec["workload"]
    for cap, want in asks.items():
        if cap == "pids" and work == "bomb":
            stopped = f["threads"] is not None and f["threads"] < want
            if not (stopped and any(f["pids_ev"].values())):
                out.append(f"{name}: pids {want:g} not enforced: {f['threads']} threads, "
                           f"pids.events max rose in {f['pids_ev'] or 'no cgroup'}")
        elif cap == "memory" and work == "hog":
            killed = any(f["oom_kill"].values()) or f["dmesg_oom_kills"] > 0
            if not killed or f["reached_mib"] * MIB >= want:
                out.append(f"{name}: memory {want / MIB:g} MiB not enforced: hog reached "
                           f"{f['reached_mib']} MiB, oom_kill rose in {f['oom_kill'] or 'none'}, "
                           f"{f['dmesg_oom_kills']} oom-kill line(s) in dmesg")
        elif cap == "cpus" and work == "busy":
            throttled = (f["own_nr_throttled"] or 0) > 0 or any(f["throttled"].values())
            if not throttled or f["ratio"] is None or f["ratio"] > verdict.CPU_RATIO_MAX:
                out.append(f"{name}: cpus {want:g} not enforced: CPU/wall {f['ratio']}, "
                           f"nr_throttled {f['own_nr_throttled']}")
        elif run.get(cap) is None or run[cap] > want + 1e-9:
            out.append(f"{name}: {cap} {want:g} not in force over the run's cgroup "
                       f"/{f['placed']} (strictest there: {_ms(run.get(cap), cap)})")
    return out


@pytest.mark.parametrize("layout", [lay.name for lay in LAYOUTS])
def test_layout(lab: dict[str, Any], layout: str) -> None:
    recs = [r for r in lab["records"] if r.get("layout") == layout]
    if not recs and lab["meta"].get("saved"):
        pytest.skip(f"{lab['meta']['saved']} has no scenario of {layout}")
    assert recs, f"the lab ran no scenario of {layout} ({len(lab['records'])} of " \
        f"{lab['meta'].get('planned')} ran; timed out: {lab['meta'].get('timed_out')})"
    problems = [p for rec in recs for p in kernel_problems(rec)]
    assert not problems, f"{len(problems)} problem(s) in {layout}:\n" + "\n".join(problems)
    # launcher's own words agree with the kernel (in addition to the counters above)
    for rec in recs:
        assert verdict.judge(rec)["outcome"] == verdict.expected(rec), rec["scenario"]


def test_verdict_reads_an_escape_from_the_counters() -> None:
    """The rule without a kernel: a bomb placed beside a scope with pids.max 60 that started
    200 threads escaped, whatever launcher said."""
    rec: Record = {
        "layout": "limited-scope", "scenario": "cpu05/bomb", "workload": "bomb", "arg": 200,
        "asks": {"cpus": 0.5}, "require": False, "rc": 0, "expect": "enforced",
        "caller": "user.slice/session-3.scope",
        "caller_limits": {"pids": 60, "memory": 300 * MIB, "cpus": None},
        "workload_limits": {"pids": None, "memory": None, "cpus": 0.5},
        "started": {"pid": 9, "placed": "user.slice/launcher-1-x"},
        "end_mark": {"workload": "bomb", "started": 200},
        "before": {}, "after": {}, "summary": {"engine": {"enforced": {"cpus": "0.5"}}},
    }
    v = verdict.judge(rec)
    assert v["outcome"] == "escaped"
    assert len(v["escapes"]) == 3  # the threads, and both limits of the scope it left
    assert kernel_problems({**rec, "leftovers": {"join_ok": True}})
    rec.update(workload_limits={"pids": 60, "memory": 300 * MIB, "cpus": 0.5},
               end_mark={"workload": "bomb", "started": 55},
               started={"pid": 9, "placed": "user.slice/session-3.scope/launcher-1-x"})
    assert verdict.judge(rec)["outcome"] == "enforced"


EXTRAS = ("kill9-container", "kill9-limited-scope", "entrypoint-container-ns",
          "entrypoint-require", "doctor-clean", "report-002", "threads-max", "growth")


@pytest.mark.parametrize("name", EXTRAS)
def test_extra(lab: dict[str, Any], name: str) -> None:
    """kill -9 of launcher, the image's entrypoint, doctor --clean and report 002 in the lab
    (tests/lab/extras.py says what each must show)."""
    found = [x for x in lab.get("extras", []) if x["extra"] == name]
    if not found and lab["meta"].get("saved"):
        pytest.skip(f"{lab['meta']['saved']} has no extra {name}")
    assert found, f"the lab did not run {name}"
    assert found[0]["problems"] == [], found[0]
    if name == "report-002":
        facts = found[0]["facts"]
        assert facts["bare"]["died_of_pthread_create"]  # the control dies
        for run in ("launcher", "launcher --fit"):
            assert not facts[run]["died_of_pthread_create"]
            assert facts[run]["rc"] == 0 or facts[run]["refusal"], facts[run]


def test_the_readme_table_is_the_labs(lab: dict[str, Any]) -> None:
    """The enforcement table (docs/cgroup-v2.md) is what this lab run showed (regenerate with
    `scripts/cgroup2-lab.py --readme`, or `--from-json FILE --readme` from a saved run)."""
    if not readme.complete(lab):
        pytest.skip("a partial lab run (CGROUP2_LAB_RESULTS of a subset)")
    assert readme.in_readme(ROOT / readme.PAGE) == readme.table(lab), (
        f"{readme.PAGE}'s cgroup2-lab block differs from this lab run: run "
        "`scripts/cgroup2-lab.py --readme`")


def _processes_naming(text: str) -> list[str]:
    """Command lines of the processes whose arguments contain `text`."""
    out = []
    for entry in Path("/proc").iterdir():
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmd:
            out.append(f"{entry.name} {cmd[:200]}")
    return out


def _needs_qemu() -> None:
    lacks = qemu.missing()
    if lacks:
        if os.environ.get("CI"):
            pytest.fail(f"QEMU cannot boot the lab: {lacks}; CI is set")
        pytest.skip(f"QEMU cannot boot the lab: {lacks}")


def test_a_lab_past_its_time_leaves_no_kernel_running() -> None:
    """A timeout mid-boot (QEMU needs ~8 s to reach the lab's init, UML ~4 s) stops the kernel
    and removes its work folder."""
    _needs_qemu()
    said: list[str] = []
    with pytest.raises(RuntimeError, match="wrote no results"):
        host.run_lab(ROOT, layouts=["root"], scenarios=["none/bomb"], extras=False,
                     way=host.Way("qemu"), timeout=2, progress=said.append)
    work = said[0].rsplit("(", 1)[1].rstrip(")")
    assert work.startswith("/tmp/cgroup2-lab-"), said
    assert not _processes_naming(work)
    assert not Path(work).exists()


def test_a_lab_killed_by_a_signal_leaves_no_kernel_running(tmp_path: Path) -> None:
    """SIGTERM (no handler: no `finally` runs) or SIGKILL of the process that booted QEMU:
    the kernel dies with it (PR_SET_PDEATHSIG)."""
    _needs_qemu()
    code = ("import sys; from tests.lab import host; host.run_lab(layouts=['root'], "
            "scenarios=['none/bomb'], extras=False, way=host.Way('qemu'), "
            "progress=lambda s: print(s, flush=True))")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "booting QEMU (...) (/tmp/cgroup2-lab-...)"
    work = line.strip().rsplit("(", 1)[1].rstrip(")")
    deadline = time.monotonic() + 30
    while not _processes_naming(f"path={work},") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_naming(f"path={work},"), f"QEMU never started: {line!r}"
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 10
    while _processes_naming(f"path={work},") and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _processes_naming(f"path={work},")
    for entry in left:  # a failing test leaves nothing either
        os.kill(int(entry.split()[0]), signal.SIGKILL)
    shutil.rmtree(work, ignore_errors=True)
    assert not left


def test_a_child_dies_with_the_thread_that_started_it() -> None:
    """qemu.die_with_parent, without a kernel: a sleep started from a thread that ends."""
    started: list[subprocess.Popen[bytes]] = []
    t = threading.Thread(target=lambda: started.append(subprocess.Popen(
        ["sleep", "60"], preexec_fn=qemu.die_with_parent)))
    t.start()
    t.join()
    assert started[0].wait(timeout=10) == -signal.SIGKILL
