"""The in-guest driver: runs inside the user-mode Linux kernel (pure cgroup v2) as root.

`python -m tests.lab.guest CONFIG.json` (or this file's path). For every layout x scenario:
set the layout up fresh, run `launcher run --runtime native` as the layout's caller, read the
kernel's counters for every cgroup before, while and after, and tear everything down. Writes
the results JSON (rewritten after each scenario) and one progress line per scenario on stdout
(the console, prefixed `LAB `). Standard library only.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run by path: make `tests.lab` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.lab import verdict  # noqa: E402
from tests.lab.spec import BY_NAME, PROFILES, Layout, Scenario, scenarios  # noqa: E402

CG = Path("/sys/fs/cgroup")
LAB = Path("/run/lab")  # a tmpfs in the guest: nothing here touches the host's disk
ENTER = LAB / "enter.sh"
SLEEP = "/bin/sleep"
USER_PYTHON = "/usr/bin/python3"
POLL_S = 0.02
RUN_POLL_S = 0.1
OOM_WORDS = ("oom-kill:", "Memory cgroup out of memory", "Killed process")

# Puts the shell where the layout's caller runs, then execs the command: root joins ENTRY,
# becomes the user, the user makes and joins its own cgroup, then the namespaces.
ENTER_SH = r"""#!/bin/sh
# enter.sh STAGE CMD...; `tee` writes the pid so that a refusal names its errno
join() { echo $$ | tee "/sys/fs/cgroup/$1/cgroup.procs" >/dev/null; }
stage=$1; shift
case $stage in
root)
  join "$LAB_ENTRY" || exit 97
  if [ "$LAB_UID" != 0 ]; then
    exec setpriv --reuid="$LAB_UID" --regid="$LAB_UID" --clear-groups \
      /bin/sh /run/lab/enter.sh user "$@"
  fi
  exec /bin/sh /run/lab/enter.sh user "$@";;
user)
  if [ -n "$LAB_MAKE" ]; then
    mkdir -p "/sys/fs/cgroup/$LAB_MAKE" && join "$LAB_MAKE" || exit 97
  fi
  cd "$HOME" || exit 97
  if [ -n "$LAB_NS" ]; then
    exec unshare --cgroup --mount --propagation private /bin/sh /run/lab/enter.sh ns "$@"
  fi
  exec "$@";;
ns)
  # as Docker: the container sees a cgroup2 mount of its own namespace's root only
  umount -l /sys/fs/cgroup && mount -t cgroup2 cgroup2 /sys/fs/cgroup || exit 97
  exec "$@";;
esac
exit 98
"""


def say(line: str) -> None:
    """A line for the host (the console is the host's stdout)."""
    print(f"LAB {line}", flush=True)


# ---- reading the kernel ---------------------------------------------------------------------

def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _kv(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in (_read(path) or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            out[parts[0]] = int(parts[1])
    return out


def _limit(path: Path) -> int | None:
    text = (_read(path) or "max").strip()
    return None if text == "max" or not text.isdigit() else int(text)


def _cpu_limit(path: Path) -> float | None:
    parts = (_read(path) or "max").split()
    return None if not parts or parts[0] == "max" else int(parts[0]) / int(parts[1])


def limits_of(rel: str) -> dict[str, float | None]:
    """One cgroup's own pids.max, memory.max (bytes) and cpu.max (CPUs); None is no limit."""
    d = CG / rel
    return {"pids": _limit(d / "pids.max"), "memory": _limit(d / "memory.max"),
            "cpus": _cpu_limit(d / "cpu.max")}


def limits_along(rel: str) -> dict[str, float | None]:
    """The strictest of each limit over `rel` and its ancestors: what holds a task there.
    Cgroups on the path that do not exist yet hold nothing."""
    parts = [p for p in rel.split("/") if p]
    out: dict[str, float | None] = {"pids": None, "memory": None, "cpus": None}
    for i in range(1, len(parts) + 1):
        for k, v in limits_of("/".join(parts[:i])).items():
            if v is not None and (out[k] is None or v < out[k]):  # type: ignore[operator]
                out[k] = v
    return out


def counters(rel: str) -> dict[str, Any]:
    """The counters the verdicts use, for one cgroup."""
    d = CG / rel
    pe, me, cs = _kv(d / "pids.events"), _kv(d / "memory.events"), _kv(d / "cpu.stat")
    procs = (_read(d / "cgroup.procs") or "").split()
    try:
        owner = d.stat().st_uid
    except OSError:
        owner = None
    return {"pids_max_ev": pe.get("max", 0), "oom_kill": me.get("oom_kill", 0),
            "oom": me.get("oom", 0), "mem_max_ev": me.get("max", 0),
            "nr_throttled": cs.get("nr_throttled", 0),
            "subtree": " ".join(sorted((_read(d / "cgroup.subtree_control") or "").split())),
            "limits": limits_of(rel) if rel else {}, "procs": len(procs), "owner": owner,
            "memory_peak": _limit(d / "memory.peak")}


def walk() -> list[str]:
    """Every cgroup directory, parents first, relative to the mount ("" is the root)."""
    out = []
    for dirpath, _dirs, _files in os.walk(CG):
        rel = os.path.relpath(dirpath, CG)
        out.append("" if rel == "." else rel)
    return sorted(out, key=lambda p: (p.count("/") if p else -1, p))


def snapshot() -> dict[str, dict[str, Any]]:
    return {rel: counters(rel) for rel in walk()}


def cgroup_of(pid: int) -> str | None:
    """A process's v2 cgroup as the root namespace sees it (relative to the mount)."""
    for line in (_read(Path(f"/proc/{pid}/cgroup")) or "").splitlines():
        if line.startswith("0::"):
            return line[3:].strip().strip("/")
    return None


def dmesg_oom() -> list[str]:
    """The kernel log's OOM lines since the last call (read and cleared: `dmesg -c`)."""
    out = subprocess.run(["dmesg", "-c"], check=False, capture_output=True, text=True).stdout
    return [line.strip() for line in out.splitlines() if any(w in line for w in OOM_WORDS)]


def probe_rules() -> dict[str, str]:
    """cgroup v2's rules as this kernel applies them (FIELD.md 29), for the record: enabling
    each controller for the children of a cgroup that holds a process, and a process joining
    a cgroup whose subtree_control is not empty."""
    out: dict[str, str] = {}
    probe = CG / "lab-probe"
    sleeper = subprocess.Popen([SLEEP, "1000"])
    try:
        (CG / "cgroup.subtree_control").write_text("+cpu +memory +pids +io")
        probe.mkdir()
        (probe / "cgroup.procs").write_text(str(sleeper.pid))
        for c in ("pids", "cpu", "memory", "io"):
            out[f"+{c} with a process inside"] = _try_write(probe / "cgroup.subtree_control",
                                                            f"+{c}")
            if out[f"+{c} with a process inside"] == "ok":
                out[f"join after +{c}"] = _try_write(probe / "cgroup.procs", str(os.getpid()))
                (CG / "cgroup.procs").write_text(str(os.getpid()))
                _try_write(probe / "cgroup.subtree_control", f"-{c}")
    except OSError as exc:
        out["error"] = str(exc)
    finally:
        sleeper.kill()
        sleeper.wait()
        Setup(BY_NAME["root"]).teardown()
    return out


def _try_write(path: Path, text: str) -> str:
    try:
        path.write_text(text)
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc))


# ---- layouts --------------------------------------------------------------------------------

class Setup:
    """One layout, made fresh: its cgroups, controllers, limits, owners and sleeping
    neighbours. `teardown` kills every process in every cgroup below the root and removes
    them all (whatever launcher made too), and disables the root's controllers."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.sleepers: list[subprocess.Popen[bytes]] = []

    def make(self) -> None:
        lay = self.layout
        for d in lay.dirs:
            if d:
                (CG / d).mkdir(exist_ok=True)
        for d, ctrls in lay.enable:
            (CG / d / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in ctrls))
        for d, name, value in lay.limits:
            (CG / d / name).write_text(value)
        if lay.delegate:  # systemd's Delegate=yes: the directory and the files it delegates
            owned = [lay.delegate]
            if lay.entry and lay.entry.startswith(lay.delegate + "/"):
                owned.append(lay.entry)
            for d in owned:
                base = CG / d
                for p in (base, base / "cgroup.procs", base / "cgroup.subtree_control",
                          base / "cgroup.threads"):
                    os.chown(p, lay.uid, lay.uid)
        for d in lay.sleepers:
            p = subprocess.Popen([SLEEP, "1000"], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            (CG / d / "cgroup.procs").write_text(str(p.pid))
            self.sleepers.append(p)

    def teardown(self) -> list[str]:
        """Back to a bare hierarchy; returns what could not be undone."""
        for p in self.sleepers:
            p.kill()
            p.wait()
        problems: list[str] = []
        dirs = [d for d in walk() if d]
        for d in dirs:
            if (CG / d / "cgroup.kill").exists():
                with contextlib.suppress(OSError):
                    (CG / d / "cgroup.kill").write_text("1")
        for d in reversed(dirs):  # children first
            for _ in range(100):
                try:
                    (CG / d).rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
            else:
                problems.append(f"cannot remove {d}")
        on = (_read(CG / "cgroup.subtree_control") or "").split()
        if on:
            with contextlib.suppress(OSError):
                (CG / "cgroup.subtree_control").write_text(" ".join(f"-{c}" for c in on))
        if (_read(CG / "cgroup.subtree_control") or "").split():
            problems.append("root subtree_control not cleared")
        return problems


# ---- one scenario ---------------------------------------------------------------------------

class Guest:
    def __init__(self, config: dict[str, Any]) -> None:
        self.cfg = config
        self.src: str = config["src"]
        self.python: str = config["python"]
        self.site_dirs: list[str] = config.get("site_dirs", [])
        self.timeout: float = float(config.get("scenario_timeout", 60))
        # how much slower than UML this kernel runs (an emulated CPU): waits grow with it
        self.scale: float = float(config.get("time_scale", 1))
        self.results_path = Path(config["results"])
        self.user_python: dict[int, tuple[str, str]] = {}  # uid -> (python, PYTHONPATH)
        self.count = 0
        self.checks: list[str] = []  # how each caller's python was chosen
        self.results: dict[str, Any] = {"meta": {}, "records": []}

    # preparation

    def prepare(self) -> None:
        for sub in ("marks", "out", "runs", "profiles", "home", "pycache"):
            (LAB / sub).mkdir(parents=True, exist_ok=True)
        for sub in ("marks", "pycache"):
            os.chmod(LAB / sub, 0o1777)
        os.chmod(LAB, 0o755)
        work = Path(__file__).with_name("workloads.py").read_text()
        for name in ("bomb", "hog", "busy"):
            (LAB / f"{name}.py").write_text(work)
            os.chmod(LAB / f"{name}.py", 0o644)
        # launcher draws telemetry.png in a detached process after a run of 2+ samples;
        # matplotlib costs seconds of the guest's one CPU, so the lab hides it (launcher then
        # skips the plot, as on a host without matplotlib)
        stub = LAB / "noplot" / "matplotlib"
        stub.mkdir(parents=True, exist_ok=True)
        (stub / "__init__.py").write_text('raise ImportError("no plots in the lab")\n')
        ENTER.write_text(ENTER_SH)
        os.chmod(ENTER, 0o755)
        for stem, limits in PROFILES.items():
            body = f"name: {stem}\nextends: base\nlimits: {json.dumps(limits)}\n"
            (LAB / "profiles" / f"{stem}.yaml").write_text(body)
        uids = sorted({lay.uid for lay in BY_NAME.values()})
        for uid in uids:
            home = LAB / "home" / str(uid)
            home.mkdir(exist_ok=True)
            os.chown(home, uid, uid)
            self.user_python[uid] = self._python_for(uid)
        self.results["meta"] = {
            "kernel": os.uname().release, "cpus": os.cpu_count(),
            "controllers": (_read(CG / "cgroup.controllers") or "").split(),
            "src": self.src, "python": self.python,
            "user_python": {str(u): p for u, (p, _) in self.user_python.items()},
            "python_checks": self.checks, "kernel_rules": probe_rules(),
        }

    def _python_for(self, uid: int) -> tuple[str, str]:
        """(python, PYTHONPATH) that `uid` can run launcher with: root runs the configured
        python; a user, whom a venv under /root is out of reach of (hostfs lets setpriv exec
        it, but not a shell), the system's python in a venv that sees the configured one's
        site-packages; else the system's with them on PYTHONPATH; else the configured one."""
        path = os.pathsep.join([self.src, str(LAB / "noplot")])
        if uid == 0:
            return self.python, path
        fallback = os.pathsep.join([path, *self.site_dirs])
        for python, pythonpath in ((self._user_venv(), path), (USER_PYTHON, fallback),
                                   (self.python, path)):
            if self._can_import(uid, python, pythonpath):
                return python, pythonpath
        return self.python, path  # the run will say why

    def _user_venv(self) -> str:
        """A venv on the guest's tmpfs over the system's python whose site-packages names the
        configured python's (a .pth of paths): its dependencies without putting them on
        PYTHONPATH, ahead of the standard library (slow: every import probes them first)."""
        venv = LAB / "uvenv"
        python = venv / "bin" / "python"
        if not python.exists():
            ver = subprocess.run([USER_PYTHON, "-c", "import sys; print('%d.%d' % "
                                  "sys.version_info[:2])"], capture_output=True, text=True,
                                 check=False).stdout.strip()
            site = venv / "lib" / f"python{ver}" / "site-packages"
            site.mkdir(parents=True)
            (venv / "bin").mkdir()
            python.symlink_to(USER_PYTHON)
            (venv / "pyvenv.cfg").write_text(f"home = {Path(USER_PYTHON).parent}\n"
                                             "include-system-site-packages = false\n"
                                             f"version = {ver}\n")
            (site / "lab-deps.pth").write_text("".join(f"{d}\n" for d in self.site_dirs))
        return str(python)

    def _can_import(self, uid: int, python: str, pythonpath: str) -> bool:
        """As the caller will: a shell of `uid` that execs the python."""
        argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "/bin/sh",
                "-c", 'exec "$@"', "sh", python, "-c", "import launcher, yaml, click"]
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": pythonpath, "HOME": "/",
               "PYTHONDONTWRITEBYTECODE": "1"}
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        self.checks.append(f"uid {uid} {python}: rc {done.returncode} {done.stderr[-300:]}")
        return done.returncode == 0

    # running

    def env_for(self, layout: Layout, runs: Path, mark: Path) -> dict[str, str]:
        pythonpath = self.user_python[layout.uid][1]
        home = LAB / "home" / str(layout.uid)
        return {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": str(home), "XDG_CACHE_HOME": f"{home}/.cache",
            "XDG_CONFIG_HOME": f"{home}/.config", "LANG": "C.UTF-8",
            "PYTHONPATH": pythonpath, "PYTHONPYCACHEPREFIX": str(LAB / "pycache"),
            "LAUNCHER_RUNS_DIR": str(runs), "LAB_MARK": str(mark),
            "LAB_ENTRY": layout.entry if layout.entry is not None else layout.caller,
            "LAB_UID": str(layout.uid), "LAB_MAKE": layout.caller if layout.user_makes else "",
            "LAB_NS": "1" if layout.namespace else "",
        }

    def command(self, layout: Layout, sc: Scenario) -> list[str]:
        python = self.user_python[layout.uid][0]
        return [python, "-m", "launcher", "run", "--runtime", "native", "--profile",
                str(LAB / "profiles" / f"{sc.profile}.yaml"),
                *(["--require-limits"] if sc.require else []),
                "--", USER_PYTHON, str(LAB / f"{sc.workload}.py"), str(sc.arg)]

    def run_one(self, layout: Layout, sc: Scenario) -> dict[str, Any]:
        self.count += 1
        n = self.count
        runs, mark = LAB / "runs" / str(n), LAB / "marks" / str(n)
        runs.mkdir()
        os.chown(runs, layout.uid, layout.uid)
        out_path, err_path = LAB / "out" / f"{n}.out", LAB / "out" / f"{n}.err"
        env = self.env_for(layout, runs, mark)
        argv = self.command(layout, sc)
        setup = Setup(layout)
        rec: dict[str, Any] = {
            "n": n, "layout": layout.name, "number": layout.number, "scenario": sc.key,
            "profile": sc.profile, "workload": sc.workload, "arg": sc.arg,
            "require": sc.require, "asks": sc.asks, "caller": layout.caller,
            "command": " ".join(argv), "expect": layout.expect,
        }
        t0 = time.monotonic()
        try:
            setup.make()
        except OSError as exc:
            rec["setup_error"] = str(exc)
            rec["teardown_problems"] = setup.teardown()
            return rec
        before = snapshot()  # the kernel log was cleared after the previous scenario
        rec["caller_limits"] = limits_along(layout.caller)
        rec["before"] = before
        with out_path.open("wb") as out, err_path.open("wb") as err:
            proc = subprocess.Popen([str(ENTER), "root", *argv], env=env, stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=err, start_new_session=True, cwd="/")
            t1 = time.monotonic()
            self._watch(proc, mark, rec, t1)
        rec["launcher_seconds"] = round(time.monotonic() - t1, 2)
        rec["rc"] = proc.returncode
        rec["after"] = snapshot()
        rec["dmesg_oom"] = dmesg_oom()
        rec["stdout"] = _tail(out_path.read_text(errors="replace"))
        rec["stderr"] = _tail(err_path.read_text(errors="replace"))
        rec["workload_lines"] = _json_lines(out_path.read_text(errors="replace"))
        rec["summary"] = _summary(runs)
        rec["leftovers"] = self._leftovers(layout, set(before), before, rec["after"], env,
                                           {p.pid for p in setup.sleepers})
        rec["teardown_problems"] = setup.teardown()
        rec["seconds"] = round(time.monotonic() - t0, 2)
        return rec

    def _watch(self, proc: subprocess.Popen[bytes], mark: Path, rec: dict[str, Any],
               t0: float) -> None:
        """Wait for launcher, answering the workload's marks: at its start, where it runs and
        the limits over it; at its end, every cgroup's counters (the run's still exists)."""
        deadline = time.monotonic() + self.timeout
        start, end = Path(f"{mark}.start"), Path(f"{mark}.end")
        run_cg: str | None = None
        next_poll = 0.0
        while proc.poll() is None:
            now = time.monotonic()
            if now > deadline:
                rec["timed_out"] = True
                _kill_session(proc.pid)  # launcher, and its child's own process group
                proc.wait()
                break
            if "started" not in rec and start.exists():
                info = json.loads(start.read_text())
                run_cg = cgroup_of(int(info["pid"]))
                rec["started"] = {**info, "placed": run_cg}
                rec["workload_limits"] = limits_along(run_cg or "")
                rec["dirs_during"] = walk()
                Path(f"{mark}.go").write_text("")
                rec["t_start"] = round(time.monotonic() - t0, 2)
            if run_cg is not None and now >= next_poll:
                polled = counters(run_cg)
                if polled["owner"] is not None:  # still there
                    rec["polled"] = {run_cg: polled}
                next_poll = now + RUN_POLL_S
            if "during" not in rec and end.exists():
                rec["during"] = snapshot()
                rec["end_mark"] = json.loads(end.read_text())
                Path(f"{mark}.fin").write_text("")
                rec["t_end"] = round(time.monotonic() - t0, 2)
            time.sleep(POLL_S)
        if "started" not in rec and start.exists():  # too fast to be seen while running
            rec["started"] = {**json.loads(start.read_text()), "placed": None}
        if "end_mark" not in rec and end.exists():
            rec["end_mark"] = json.loads(end.read_text())

    def _leftovers(self, layout: Layout, dirs_before: set[str],
                   before: dict[str, Any], after: dict[str, Any], env: dict[str, str],
                   sleepers: set[int]) -> dict[str, Any]:
        """New cgroups, changed subtree_controls, strangers still in cgroups, and whether a
        fresh process can still join the caller's cgroup the way the caller did."""
        parts = [p for p in layout.caller.split("/") if p]
        own = {"/".join(parts[:i]) for i in range(1, len(parts) + 1)}  # the user makes these
        was = {d: before[d]["subtree"] if d in before else "" for d in after
               if d in before or (layout.user_makes and d in own)}  # made empty
        changed = {d: [was[d], after[d]["subtree"]] for d in was
                   if was[d] != after[d]["subtree"]}
        strangers = _strangers(sleepers)
        deadline = time.monotonic() + 3 * self.scale
        while strangers and time.monotonic() < deadline:  # a process that is just exiting
            time.sleep(0.1)
            strangers = _strangers(sleepers)
        join = subprocess.run([str(ENTER), "root", "/bin/true"], env=env, capture_output=True,
                              text=True, timeout=30 * self.scale, check=False, cwd="/")
        return {"new_dirs": sorted(set(after) - dirs_before - own),
                "gone_dirs": sorted(dirs_before - set(after)), "subtree_changed": changed,
                "procs_left": strangers, "join_ok": join.returncode == 0,
                "join_error": join.stderr.strip()[-300:]}

    def run(self, layouts: list[str], keys: set[str] | None) -> None:
        t0 = time.monotonic()
        plan = [(BY_NAME[name], sc) for name in layouts for sc in scenarios()
                if keys is None or sc.key in keys]
        self.results["meta"]["planned"] = len(plan)
        say(f"plan {len(plan)} scenarios; kernel {os.uname().release}, "
            f"controllers {' '.join(self.results['meta']['controllers'])}")
        problems = Setup(BY_NAME["root"]).teardown()  # a bare start
        dmesg_oom()  # and an empty kernel log
        if problems:
            say(f"warning: {problems}")
        for i, (layout, sc) in enumerate(plan, 1):
            try:
                rec = self.run_one(layout, sc)
            except Exception as exc:  # noqa: BLE001 - one scenario's error is its result
                rec = {"layout": layout.name, "number": layout.number, "scenario": sc.key,
                       "asks": sc.asks, "require": sc.require, "workload": sc.workload,
                       "expect": layout.expect, "error": f"{type(exc).__name__}: {exc}"}
                Setup(layout).teardown()
            rec["verdict"] = verdict.judge(rec)
            self.results["records"].append(rec)
            self.results["meta"]["guest_seconds"] = round(time.monotonic() - t0, 1)
            self.save()
            say(f"[{i}/{len(plan)}] {verdict.progress_line(rec)}")
        wanted = self.cfg.get("extras", True)
        if wanted:
            from tests.lab.extras import Extras

            extras = self.results.setdefault("extras", [])
            for rec in Extras(self).run_all(wanted if isinstance(wanted, list) else None):
                extras.append(rec)
                self.save()
                say(f"[extra] {rec['extra']}: "
                    f"{'; '.join(rec['problems']) or 'as it must be'} ({rec['seconds']}s)")
        self.results["meta"]["guest_seconds"] = round(time.monotonic() - t0, 1)
        self.save()
        say(f"done in {time.monotonic() - t0:.0f}s")

    def save(self) -> None:
        tmp = self.results_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.results))
        tmp.replace(self.results_path)


def _kill_session(sid: int) -> None:
    """SIGKILL every process of session `sid` (the caller's: launcher, the supervisor and
    the workload, whatever their process groups)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        stat = _read(entry / "stat") or ""
        fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) "
        if len(fields) > 3 and fields[3] == str(sid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry.name), signal.SIGKILL)


def _strangers(sleepers: set[int]) -> dict[str, list[str]]:
    """Processes in any cgroup below the root but the layout's sleepers: `PID command`."""
    out: dict[str, list[str]] = {}
    for d in walk():
        pids = [p for p in (_read(CG / d / "cgroup.procs") or "").split()
                if d and int(p) not in sleepers]
        if pids:
            out[d] = [f"{p} {(_read(Path(f'/proc/{p}/cmdline')) or '').replace(chr(0), ' ')[:80]}"
                      for p in pids]
    return out


def _tail(text: str, n: int = 2000) -> str:
    return text if len(text) <= n else "..." + text[-n:]


def _json_lines(text: str) -> list[dict[str, Any]]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                obj = json.loads(line)
                if isinstance(obj, dict) and "workload" in obj:
                    out.append(obj)
    return out[-3:]


def _summary(runs: Path) -> dict[str, Any] | None:
    for path in sorted(runs.glob("*/summary.json")):
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(path.read_text())
            return {k: data.get(k) for k in ("run_id", "engine", "diagnosis", "exit_status")}
    return None


def main(argv: list[str]) -> int:
    config = json.loads(Path(argv[0]).read_text())
    guest = Guest(config)
    try:
        guest.prepare()
        guest.run(config["layouts"], set(config["scenarios"]) if config.get("scenarios")
                  else None)
    except Exception as exc:  # noqa: BLE001 - the host must learn what broke
        guest.results["meta"]["error"] = f"{type(exc).__name__}: {exc}"
        guest.save()
        say(f"error: {exc}")
        return 1
    finally:
        shutil.rmtree(LAB / "out", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
