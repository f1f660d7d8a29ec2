"""The host side of the cgroup v2 lab: boot one user-mode Linux kernel (FIELD.md 35) whose init
runs the guest driver over every layout x scenario, stream its progress lines, read its
results JSON back through hostfs, and print the table."""

from __future__ import annotations

import json
import os
import queue
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.lab import verdict
from tests.lab.spec import BY_NAME, LAYOUTS
from tests.lab.spec import scenarios as all_scenarios

REPO = Path(__file__).resolve().parents[2]
LINUX = "/usr/bin/linux"
PREFIX = "LAB "

INIT_SH = """#!/bin/sh
# init of the lab's UML guest: a pure cgroup v2 hierarchy, then the driver, then power off
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t cgroup2 none /sys/fs/cgroup
mkdir -p /dev/shm
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /run
cd {repo} && env -i PATH="$PATH" PYTHONDONTWRITEBYTECODE=1 HOME=/run \\
  {python} -m tests.lab.guest {config}
echo "LAB guest exit $?"
poweroff -f
"""


class LabUnavailable(RuntimeError):
    """No user-mode Linux kernel on this machine."""


class HostRefusesUml(RuntimeError):
    """User-mode Linux is installed, but the host kernel will not run its guest processes
    (seen on a 6.18 host with Debian bookworm's UML 6.1: every guest process dies of SIGSEGV
    as UML sets its FP registers). No install step fixes it on this host."""


HOST_REFUSES = "ptrace set fp regs failed"  # UML's own words for it (above loglevel 3)


def _host_refuses(linux: str, mem: str) -> str | None:
    """After a guest's init died at once: UML's line where the host refused it, from a boot
    of `/bin/true` as init with the kernel's messages on; None where it did not say so."""
    work = Path(tempfile.mkdtemp(prefix="cgroup2-probe-", dir="/tmp"))
    try:
        (work / "uml").mkdir()
        out = subprocess.run(
            [linux, f"mem={mem}", "rootfstype=hostfs", "rootflags=/", "rw", "init=/bin/true",
             "con=null", "con0=fd:0,fd:1", f"uml_dir={work}/uml", f"umid={work.name}"],
            stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
            env={**os.environ, "TMPDIR": _ram_dir(_bytes(mem))}, start_new_session=True)
    except (OSError, subprocess.TimeoutExpired):
        return None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = (out.stdout + out.stderr).decode(errors="replace")
    return next((ln.strip() for ln in text.splitlines() if HOST_REFUSES in ln), None)


def linux_binary() -> str | None:
    """The user-mode Linux kernel: Debian's /usr/bin/linux, else `linux` on PATH."""
    return LINUX if os.access(LINUX, os.X_OK) else shutil.which("linux")


def default_python(repo: Path = REPO) -> str:
    venv = repo / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def site_dirs(python: str) -> list[str]:
    """The python's site-packages: a non-root caller gets them on PYTHONPATH when it cannot
    run that python itself (a venv under /root)."""
    code = ("import json, sysconfig; p = sysconfig.get_paths(); "
            "print(json.dumps(sorted({p['purelib'], p['platlib']})))")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return list(json.loads(out.stdout))


def _ram_dir(mem_bytes: int) -> str:
    """Where UML keeps its RAM file (mapped executable): /dev/shm when it has room and is not
    mounted noexec, else /tmp."""
    for d in ("/dev/shm", "/tmp"):
        try:
            st = os.statvfs(d)
        except OSError:
            continue
        if st.f_flag & os.ST_NOEXEC:
            continue
        if st.f_bavail * st.f_frsize > mem_bytes + 64 * 1024 * 1024:
            return d
    return "/tmp"


def _bytes(size: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(size[:-1]) * units[size[-1].upper()] if size[-1].upper() in units else int(size)


def run_lab(src: Path | str = REPO, *, python: str | None = None,
            layouts: list[str] | None = None, cpu: int | None = None, extras: bool = True,
            progress: Callable[[str], None] | None = None, **kw: Any) -> dict[str, Any]:
    """Boot the lab and return {"meta": ..., "records": [...], "extras": [...]}. With two or
    more CPUs (and no `cpu` given) two UML kernels run at once, each pinned to a CPU of its
    own, each with half of the layouts (the second one also runs the extras): about half the
    wall time of one. Records come back in layout order."""
    names = layouts or [lay.name for lay in LAYOUTS]
    cpus = sorted(os.sched_getaffinity(0))
    if cpu is not None or len(cpus) < 2 or len(names) < 2:
        return _boot(src, python=python, layouts=names, cpu=cpu, extras=extras,
                     progress=progress, **kw)
    cut = (len(names) + 1) // 2  # the second also runs the extras (about a minute)
    groups = [(names[:cut], cpus[-1], False), (names[cut:], cpus[-2], extras)]
    out: list[dict[str, Any] | BaseException] = [{}, {}]
    lock = threading.Lock()

    def boot(i: int) -> None:
        part, pin, with_extras = groups[i]

        def said(line: str) -> None:
            if progress:
                with lock:
                    progress(f"[{'ab'[i]}] {line}")

        try:
            out[i] = _boot(src, python=python, layouts=part, cpu=pin, extras=with_extras,
                           progress=said, **kw)
        except BaseException as exc:  # noqa: BLE001 - re-raised below, in this thread
            out[i] = exc

    threads = [threading.Thread(target=boot, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for part in out:
        if isinstance(part, BaseException):
            raise part
    a, b = out  # type: ignore[misc]
    order = {n: i for i, n in enumerate(names)}
    data = {"meta": dict(a["meta"]),
            "records": sorted(a["records"] + b["records"],
                              key=lambda r: order.get(r.get("layout", ""), 99)),
            "extras": a.get("extras", []) + b.get("extras", [])}
    data["meta"].update({
        "planned": a["meta"].get("planned", 0) + b["meta"].get("planned", 0),
        "total_seconds": max(a["meta"]["total_seconds"], b["meta"]["total_seconds"]),
        "guest_seconds": max(a["meta"].get("guest_seconds", 0),
                             b["meta"].get("guest_seconds", 0)),
        "timed_out": a["meta"]["timed_out"] or b["meta"]["timed_out"],
        "boots": [{"layouts": g[0], "host_cpu": g[1],
                   "seconds": d["meta"]["total_seconds"]} for g, d in zip(groups, out,
                                                                          strict=True)]})
    return data


def _boot(src: Path | str = REPO, *, python: str | None = None,
            layouts: list[str] | None = None, scenarios: list[str] | None = None,
            mem: str = "1G", timeout: float = 900, scenario_timeout: float = 60,
            cpu: int | None = None,
            progress: Callable[[str], None] | None = None, keep: bool = False,
            verbose: bool = False, extras: bool = True) -> dict[str, Any]:
    """Boot the lab once and return {"meta": ..., "records": [...]}, each record with its
    verdict. `cpu`: the host CPU the UML kernel is pinned to (default the last one this
    process may use; -1: not pinned). Raises LabUnavailable without user-mode Linux,
    RuntimeError when the guest produced no results."""
    linux = linux_binary()
    if linux is None:
        raise LabUnavailable("user-mode Linux is not installed (/usr/bin/linux, Debian's "
                             "user-mode-linux package)")
    names = layouts or [lay.name for lay in LAYOUTS]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise ValueError(f"unknown layout(s): {', '.join(unknown)}; "
                         f"known: {', '.join(BY_NAME)}")
    known = {sc.key for sc in all_scenarios()}
    wrong = [k for k in scenarios or [] if k not in known]
    if wrong:
        raise ValueError(f"unknown scenario(s): {', '.join(wrong)}; known: "
                         f"{', '.join(sorted(known))}")
    python = python or default_python()
    say = progress or (lambda line: None)
    work = Path(tempfile.mkdtemp(prefix="cgroup2-lab-", dir="/tmp"))  # seen by the guest
    results = work / "results.json"
    config = {"src": str(Path(src).resolve()), "python": python, "site_dirs": site_dirs(python),
              "layouts": names, "scenarios": scenarios or [], "results": str(results),
              "scenario_timeout": scenario_timeout, "extras": extras}
    (work / "config.json").write_text(json.dumps(config, indent=1))
    init = work / "init.sh"
    init.write_text(INIT_SH.format(repo=shlex.quote(str(REPO)), python=shlex.quote(python),
                                   config=shlex.quote(str(work / "config.json"))))
    init.chmod(0o755)
    argv = [linux, f"mem={mem}", "rootfstype=hostfs", "rootflags=/", "rw", f"init={init}",
            "con=null", "con0=fd:0,fd:1", "quiet", "loglevel=3", f"uml_dir={work}/uml",
            f"umid={work.name}"]
    (work / "uml").mkdir()
    env = {**os.environ, "TMPDIR": _ram_dir(_bytes(mem))}
    t0 = time.monotonic()
    log: list[str] = []
    timed_out = False
    # UML runs each guest process as a host process and switches between them all the time;
    # on one host CPU those switches stay warm (on this 2-core VM, pinned: 2.5x faster)
    pin = max(os.sched_getaffinity(0)) if cpu is None else cpu
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=env, start_new_session=True,
                            preexec_fn=(lambda: os.sched_setaffinity(0, {pin}))
                            if pin >= 0 else None)
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            lines.put(raw.decode(errors="replace").rstrip("\r\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    try:
        while True:
            left = timeout - (time.monotonic() - t0)
            if left <= 0:
                raise TimeoutError
            try:
                line = lines.get(timeout=min(left, 5))
            except queue.Empty:
                continue
            if line is None:
                break
            log.append(line)
            if line.startswith(PREFIX):
                say(line[len(PREFIX):])
            elif verbose:
                say(f"[uml] {line}")
        proc.wait(timeout=30)
    except (TimeoutError, subprocess.TimeoutExpired):
        timed_out = True
        say(f"lab timed out after {timeout:g}s: stopping the UML kernel")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    total = round(time.monotonic() - t0, 1)
    if not results.exists():
        tail = "\n".join(log[-40:])
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
        died = any("Attempted to kill init" in ln for ln in log)
        refused = _host_refuses(linux, mem) if died else None
        if refused is not None:
            raise HostRefusesUml(
                f"this host's kernel ({os.uname().release}) refuses the user-mode Linux "
                f"kernel's guest processes: its init died at once, after {refused!r} (UML "
                f"could not set a guest's floating-point registers through ptrace, EFAULT)")
        raise RuntimeError(f"the lab guest wrote no results (exit {proc.returncode}, "
                           f"{total}s); its console ended with:\n{tail}")
    data = json.loads(results.read_text())
    for rec in data["records"]:
        rec["verdict"] = verdict.judge(rec)  # the host's copy of the rule decides
    data["meta"].update({"total_seconds": total, "timed_out": timed_out,
                         "uml_exit": proc.returncode, "boot": " ".join(argv),
                         "ram_dir": env["TMPDIR"], "host_cpu": pin,
                         "console_tail": log[-20:]})
    if keep:
        data["meta"]["workdir"] = str(work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return data


def _said(rec: dict[str, Any]) -> str:
    engine = (rec.get("summary") or {}).get("engine") or {}
    parts = [f"enf:{','.join(engine['enforced'])}"] if engine.get("enforced") else []
    parts += [f"adv:{','.join(engine['advisory'])}"] if engine.get("advisory") else []
    return " ".join(parts) or "-"


def table(data: dict[str, Any]) -> str:
    """One row per layout x scenario: the outcome, what was expected, and the evidence."""
    head = ["#", "layout", "scenario", "outcome", "expected", "rc", "workload", "pids.events",
            "oom_kill", "nr_throttled", "placed", "launcher said", "leftovers"]
    rows = [head]
    for rec in data["records"]:
        v = rec.get("verdict") or {}
        c = verdict.counters_cell(rec)
        exp = verdict.expected(rec)
        outcome = v.get("outcome", "?")
        rows.append([str(rec.get("number", "")), rec.get("layout", ""), rec.get("scenario", ""),
                     outcome + ("" if outcome == exp else " !"), exp, str(rec.get("rc")),
                     verdict.workload_cell(rec), c["pids.events"], c["oom_kill"],
                     c["nr_throttled"], c["placed"], _said(rec), verdict.leftovers_cell(rec)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    out = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
           for r in rows]
    legend = ("C = the caller's cgroup, RUN = the run's (launcher-PID-RUNID); ev:X = "
              "memory.events oom_kill rose in X (and N cgroups above); dmesg:N@X = oom-kill "
              "lines, X the limiting memcg; sc(X:Y) = X's subtree_control is now Y; ! = not "
              "the expected outcome")
    return "\n".join([*out, "", legend])


def summary(data: dict[str, Any]) -> str:
    """Per layout: how many scenarios met the target rule, and the escapes."""
    by: dict[str, list[dict[str, Any]]] = {}
    for rec in data["records"]:
        by.setdefault(rec.get("layout", "?"), []).append(rec)
    out = []
    for name, recs in by.items():
        good = sum((r.get("verdict") or {}).get("outcome") == verdict.expected(r)
                   and not (r.get("verdict") or {}).get("leftovers") for r in recs)
        esc = sum((r.get("verdict") or {}).get("outcome") == "escaped" for r in recs)
        out.append(f"{name:<17} {good}/{len(recs)} as expected, {esc} escaped")
    meta = data.get("meta", {})
    if meta.get("timed_out") or len(data["records"]) < meta.get("planned", 0):
        out.append(f"INCOMPLETE: {len(data['records'])} of {meta.get('planned')} scenarios ran"
                   + (" (the lab timed out)" if meta.get("timed_out") else ""))
    for x in data.get("extras", []):
        out.append(f"{x['extra']:<17} {'; '.join(x['problems']) or 'as it must be'}")
    rules = meta.get("kernel_rules") or {}
    if rules:
        out.append("kernel rules: " + "; ".join(f"{k}: {v}" for k, v in rules.items()))
    out.append(f"total {meta.get('total_seconds')}s (guest {meta.get('guest_seconds')}s), "
               f"kernel {meta.get('kernel')}, src {meta.get('src')}")
    return "\n".join(out)
