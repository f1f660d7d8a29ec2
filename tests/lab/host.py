"""The host side of the cgroup v2 lab: boot one pure cgroup v2 kernel, user-mode Linux where
the host runs it (FIELD.md 35), else Debian's kernel under QEMU (qemu.py, FIELD.md 48), whose
init runs the guest driver over every layout x scenario; stream its progress lines, read its
results JSON back (through hostfs, or QEMU's writable 9p share), and print the table."""

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.lab import qemu, verdict
from tests.lab.spec import BY_NAME, LAYOUTS
from tests.lab.spec import scenarios as all_scenarios

REPO = Path(__file__).resolve().parents[2]
LINUX = "/usr/bin/linux"
PREFIX = "LAB "

INIT_SH = """#!/bin/sh
# init of the lab's guest (UML or QEMU): a pure cgroup v2 hierarchy, the driver, power off
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
echo "LAB init up (kernel uptime $(cut -d' ' -f1 /proc/uptime) s)"
mount -t sysfs sysfs /sys
mount -t cgroup2 none /sys/fs/cgroup
{prelude}mkdir -p /dev/shm
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /run
cd {repo} && env -i PATH="$PATH" PYTHONDONTWRITEBYTECODE=1 HOME=/run \\
  {python} -m tests.lab.guest {config}
echo "LAB guest exit $?"
poweroff -f
"""


class LabUnavailable(RuntimeError):
    """No way to boot the lab's kernel on this machine."""


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


def _child_setup(pin: int) -> None:
    """In the kernel's process before exec: dies with the thread that started it (a lab killed
    by a signal leaves no kernel running), pinned to host CPU `pin` unless it is -1."""
    qemu.die_with_parent()
    if pin >= 0:
        os.sched_setaffinity(0, {pin})


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


@dataclass(frozen=True)
class Way:
    """How the lab's kernel boots here: user-mode Linux, or QEMU (kvm: with KVM, else TCG)."""
    kind: str  # "uml" or "qemu"
    kvm: bool = False

    def __str__(self) -> str:
        return "user-mode Linux" if self.kind == "uml" else \
            f"QEMU ({'KVM' if self.kvm else 'TCG'})"


def choose_way(kind: str | None = None, mem: str = "1G") -> Way:
    """UML where it boots, else QEMU; `kind` forces one. Raises LabUnavailable (or
    HostRefusesUml for a forced UML) where the way cannot run, with what each lacks."""
    why: list[str] = []
    if kind in (None, "uml"):
        linux = linux_binary()
        refused = _host_refuses(linux, mem) if linux else None
        if linux and refused is None:
            return Way("uml")
        if linux is None:
            why.append("user-mode Linux is not installed (/usr/bin/linux, Debian's "
                       "user-mode-linux package)")
        else:
            msg = (f"this host's kernel ({os.uname().release}) refuses the user-mode Linux "
                   f"kernel's guest processes: {refused!r} (UML could not set a guest's "
                   "floating-point registers through ptrace, EFAULT)")
            if kind == "uml":
                raise HostRefusesUml(msg)
            why.append(msg)
    if kind in (None, "qemu"):
        lacks = qemu.missing()
        if lacks is None:
            return Way("qemu", kvm=qemu.kvm_boots())
        why.append(f"QEMU cannot boot the lab: {lacks}")
    if not why:
        raise ValueError(f"unknown way to boot the lab: {kind!r} (uml or qemu)")
    raise LabUnavailable("; ".join(why))


def describe(meta: dict[str, Any]) -> str:
    """One line for the run: the kernel, how it booted, its CPUs."""
    cpus = meta.get("cpus")
    each = f"{cpus} CPU{'s' if cpus != 1 else ''}"
    boots = len(meta.get("boots") or [1])
    return (f"cgroup v2 lab: Linux {meta.get('kernel', '?')} under {meta.get('way', '?')}, "
            + (f"{boots} kernels at once, {each} each" if boots > 1 else each))


def run_lab(src: Path | str = REPO, *, python: str | None = None,
            layouts: list[str] | None = None, cpu: int | None = None,
            extras: bool | list[str] = True, progress: Callable[[str], None] | None = None,
            way: Way | str | None = None,
            **kw: Any) -> dict[str, Any]:
    """Boot the lab and return {"meta": ..., "records": [...], "extras": [...]}. `way`: a
    Way, "uml", "qemu" or None (UML where it boots, else QEMU). Under UML with two or more
    CPUs (and no `cpu` given) two kernels run at once, each pinned to a CPU of its own, each
    with half of the layouts (the second one also runs the extras): about half the wall time
    of one; under QEMU the same, each kernel with one CPU (its guest runs one scenario at a
    time, so a second CPU would mostly idle). Records come back in layout order."""
    names = layouts or [lay.name for lay in LAYOUTS]
    if not isinstance(way, Way):
        way = choose_way(way, kw.get("mem") or "1G")
    cpus = sorted(os.sched_getaffinity(0))
    if cpu is not None or len(cpus) < 2 or len(names) < 2:
        return _boot(src, python=python, layouts=names, cpu=cpu, extras=extras,
                     progress=progress, way=way, **kw)
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
                           progress=said, way=way, vcpus=1, **kw)
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
        "boot_seconds": max(a["meta"].get("boot_seconds") or 0,
                            b["meta"].get("boot_seconds") or 0),
        "guest_seconds": max(a["meta"].get("guest_seconds", 0),
                             b["meta"].get("guest_seconds", 0)),
        "timed_out": a["meta"]["timed_out"] or b["meta"]["timed_out"],
        "boots": [{"layouts": g[0], "host_cpu": g[1],
                   "seconds": d["meta"]["total_seconds"]} for g, d in zip(groups, out,
                                                                          strict=True)]})
    return data


# (whole lab s, per scenario s, the guest's waits x): TCG emulates every instruction (a
# launcher run takes 12-20 s there, FIELD.md 48, against ~1 s under UML; a minute and more on a
# loaded host, where launcher's detached plot process, a second python, outlived 24 s)
TIMEOUTS = {"uml": (900.0, 60.0, 1.0), "qemu": (900.0, 60.0, 1.0), "tcg": (3600.0, 300.0, 20.0)}


def _boot(src: Path | str = REPO, *, python: str | None = None,
            layouts: list[str] | None = None, scenarios: list[str] | None = None,
            mem: str | None = None, timeout: float | None = None,
            scenario_timeout: float | None = None, cpu: int | None = None,
            progress: Callable[[str], None] | None = None, keep: bool = False,
            verbose: bool = False, extras: bool | list[str] = True, way: Way = Way("uml"),
            vcpus: int = qemu.CPUS) -> dict[str, Any]:
    """Boot the lab once and return {"meta": ..., "records": [...]}, each record with its
    verdict. `cpu`: the host CPU a UML kernel is pinned to (default the last one this process
    may use; -1: not pinned); `vcpus`: a QEMU guest's CPUs. Raises LabUnavailable without
    user-mode Linux (under UML), RuntimeError when the guest produced no results."""
    linux = linux_binary()
    if way.kind == "uml" and linux is None:
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
    slow = "tcg" if way.kind == "qemu" and not way.kvm else way.kind
    timeout = timeout or TIMEOUTS[slow][0]
    scenario_timeout = scenario_timeout or TIMEOUTS[slow][1]
    scale = TIMEOUTS[slow][2] * scenario_timeout / TIMEOUTS[slow][1]
    python = python or default_python()
    say = progress or (lambda line: None)
    work = Path(tempfile.mkdtemp(prefix="cgroup2-lab-", dir="/tmp"))  # seen by the guest
    results = work / "results.json"
    config = {"src": str(Path(src).resolve()), "python": python, "site_dirs": site_dirs(python),
              "layouts": names, "scenarios": scenarios or [], "results": str(results),
              "scenario_timeout": scenario_timeout, "time_scale": scale, "extras": extras}
    (work / "config.json").write_text(json.dumps(config, indent=1))
    init = work / "init.sh"
    init.write_text(INIT_SH.format(repo=shlex.quote(str(REPO)), python=shlex.quote(python),
                                   config=shlex.quote(str(work / "config.json")),
                                   prelude=qemu.prelude(work) if way.kind == "qemu" else ""))
    init.chmod(0o755)
    env = dict(os.environ)
    pin = -1
    if way.kind == "uml":
        assert linux is not None
        mem = mem or "1G"
        argv = [linux, f"mem={mem}", "rootfstype=hostfs", "rootflags=/", "rw", f"init={init}",
                "con=null", "con0=fd:0,fd:1", "quiet", "loglevel=3", f"uml_dir={work}/uml",
                f"umid={work.name}"]
        (work / "uml").mkdir()
        env["TMPDIR"] = _ram_dir(_bytes(mem))
        # UML runs each guest process as a host process and switches between them all the
        # time; on one host CPU those switches stay warm (on this 2-core VM, pinned: 2.5x)
        pin = max(os.sched_getaffinity(0)) if cpu is None else cpu
    else:
        kernel = qemu.find_kernel()
        if kernel is None:
            raise LabUnavailable("QEMU cannot boot the lab: no kernel in /boot")
        initrd = qemu.build_initramfs(kernel.release, str(init), work / "initrd.gz")
        argv = qemu.argv(kernel, initrd, work, kvm=way.kvm, cpus=vcpus, mem=mem or qemu.MEM)
    say(f"booting {way} ({work})")
    t0 = time.monotonic()
    log: list[str] = []
    timed_out = False
    booted: float | None = None
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=env, start_new_session=True,
                            preexec_fn=lambda: _child_setup(pin))
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
            at = line.find(PREFIX)  # QEMU's console may put escapes before it
            if at >= 0:
                if booted is None:  # the init's first line
                    booted = round(time.monotonic() - t0, 1)
                say(line[at + len(PREFIX):])
            elif verbose:
                say(f"[{way.kind}] {line}")
        proc.wait(timeout=30)
    except (TimeoutError, subprocess.TimeoutExpired):
        timed_out = True
        say(f"lab timed out after {timeout:g}s: stopping the {way} kernel")
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
        refused = _host_refuses(linux, mem or "1G") if died and linux and way.kind == "uml" \
            else None
        if refused is not None:
            raise HostRefusesUml(
                f"this host's kernel ({os.uname().release}) refuses the user-mode Linux "
                f"kernel's guest processes: its init died at once, after {refused!r} (UML "
                f"could not set a guest's floating-point registers through ptrace, EFAULT)")
        raise RuntimeError(f"the lab guest wrote no results under {way} (exit "
                           f"{proc.returncode}, {total}s); its console ended with:\n{tail}")
    data = json.loads(results.read_text())
    for rec in data["records"]:
        rec["verdict"] = verdict.judge(rec)  # the host's copy of the rule decides
    data["meta"].update({"total_seconds": total, "timed_out": timed_out, "way": str(way),
                         "boot_seconds": booted, "kernel_exit": proc.returncode,
                         "boot": " ".join(argv), "host_cpu": pin, "console_tail": log[-20:]})
    if way.kind == "uml":
        data["meta"]["ram_dir"] = env["TMPDIR"]
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
