"""The native runtime: the workload as a child process of this machine, for laptops and pods
with no Docker. Same supervisor, same signals, exit status and diagnosis as a container; the
pids, memory and CPU limits go into a cgroup of the run's own when the host allows it."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from launcher import contract as c
from launcher.caps.clamp import fit_rlimit
from launcher.cgroups.leaf import undo_leaf
from launcher.cgroups.run_cgroup import (
    advisory_of,
    decide,
    kill_all,
    make_run_cgroup,
    procs_of,
    wanted_caps,
)
from launcher.errors import EngineError
from launcher.rlimits import RLIMITS
from launcher.runtime.container import watch_site
from launcher.runtime.engine import (
    Enforcement,
    Engine,
    Leftover,
    OutputClosed,
    OutputSink,
    RunResult,
    Started,
    StartHook,
    passes_through,
    restore_signals,
)
from launcher.runtime.spec import RunSpec
from launcher.shipped import pythonpath
from launcher.vendors import get as get_vendor
from launcher.vendors import gpu_vendors

PACKAGE = Path(__file__).resolve().parents[1]
ENTRY = PACKAGE / "supervise" / "entrypoint.py"


class NativeEngine(Engine):
    name = "native"
    python = sys.executable
    inherits_environment = True
    runs_host_processes = True
    auto_rank = 1  # `--runtime auto` falls back to it

    def __init__(self, cgroup_root: Path | None = None) -> None:
        self.cgroup_root = cgroup_root or Path(os.environ.get("LAUNCHER_CGROUP_ROOT", "/"))

    def ping(self) -> None:
        return None

    def image_exists(self, image: str | None) -> bool:
        return True  # a native run needs no image

    def _plan(self, spec: RunSpec) -> dict[str, Any]:
        for m in spec.mounts:
            if os.path.realpath(m.source) != os.path.realpath(m.target):
                raise EngineError(f"a native run sees this host's files as they are; it cannot "
                                  f"mount {m.source} at {m.target} (use --runtime docker)")
        if spec.user and spec.user != f"{os.getuid()}:{os.getgid()}":
            raise EngineError(f"--user {spec.user}: a native run runs as the calling user "
                              f"({os.getuid()}:{os.getgid()}); --user applies to containers")
        env = gpu_environment(spec)
        if spec.imports_launcher:
            env["PYTHONPATH"] = pythonpath(os.pathsep.join(
                filter(None, [env.get("PYTHONPATH"), os.environ.get("PYTHONPATH")])))
        argv = [sys.executable, "-I", "-S", str(ENTRY), *spec.command]
        site = watch_site()
        if site:  # the isolated supervisor's psutil, for its watch
            env[c.SITE] = site
        return {"argv": argv, "env": env, "cwd": spec.workdir,
                "rlimits": {n: [u.soft, u.hard] for n, u in spec.ulimits.items()},
                "cgroup": {"pids": spec.limits.pids, "memory": spec.limits.memory,
                           "cpus": spec.limits.cpus}}

    def describe(self, spec: RunSpec) -> dict[str, Any]:
        plan = self._plan(spec)
        plan["env_added"] = plan.pop("env")  # on top of this shell's environment
        return plan

    def preview(self, spec: RunSpec) -> Enforcement:
        caps = wanted_caps(spec.limits.pids, spec.limits.memory, spec.limits.cpus)
        return Enforcement({}, advisory_of(caps, decide(caps, self.cgroup_root)) if caps else {})

    def run(self, spec: RunSpec, on_output: OutputSink,
            on_start: StartHook | None = None) -> RunResult:
        plan = self._plan(spec)
        # a pids cgroup even with no limit asked: the kernel counts the run's peak
        rc = make_run_cgroup(f"launcher-{os.getpid()}-{spec.name or os.urandom(6).hex()}",
                             pids=spec.limits.pids, memory=spec.limits.memory,
                             cpus=spec.limits.cpus, root=self.cgroup_root,
                             count=True)
        enforcement = Enforcement(rc.enforced, rc.advisory, rc.notes,
                                  {"placed": rc.placed, "binding": rc.binding})
        if spec.required_by and rc.advisory:
            rc.cleanup()
            raise EngineError(enforcement.refusal(spec.required_by))
        if spec.limits.cpuset:
            enforcement.enforced["cpuset"] = f"{spec.limits.cpuset} (affinity)"
        # the supervisor removes the run's cgroups itself if launcher dies (kill -9)
        plan["env"][c.RUN_CGROUPS] = c.encode_paths(sorted({str(d) for d in rc.dirs.values()}))
        plan["env"][c.CGROUP_UNDO] = c.encode_undo(rc.undo)
        # the supervisor takes the rlimits and CPUs itself before it starts the workload (no
        # pre-exec hook: not safe in a process with threads), within this process's own hard
        # limits (the caps were clamped to the host's facts, which --host-root may not match)
        plan["env"][c.RLIMITS] = c.encode_rlimits({
            n: fit_rlimit(u.soft, u.hard, _hard_limit(RLIMITS[n]))
            for n, u in spec.ulimits.items() if n in RLIMITS})
        plan["env"][c.CPUSET] = spec.limits.cpuset or ""  # never the caller's
        # The supervisor's own process group (a signal sent to launcher's group reaches the
        # workload once, relayed); the workload's, below it, holds the terminal. The lifeline
        # is a pipe we hold open until the end, on a descriptor of its own: stdin, and every
        # descriptor the caller's shell opened (`5>f`, `<(...)`), are the workload's, as for
        # any command. Output that is this process's own (passes_through): the supervisor's
        # as it is, no copy through launcher (a terminal stays one; a closed reader its EPIPE)
        through = passes_through(on_output)
        out = None if through else subprocess.PIPE
        lifeline_r, lifeline_w = os.pipe()
        plan["env"][c.LIFELINE_FD] = str(lifeline_r)
        plan["env"].pop(c.WATCH_STDIN, None)
        try:
            child = subprocess.Popen(plan["argv"], env={**os.environ, **plan["env"]},
                                     cwd=plan["cwd"], process_group=0, stdout=out, stderr=out,
                                     pass_fds=(*inherited_fds(), lifeline_r))
        except (OSError, subprocess.SubprocessError) as exc:
            rc.cleanup()
            os.close(lifeline_w)
            raise EngineError(f"cannot start the workload: {exc}") from None
        finally:
            os.close(lifeline_r)
        rc.join(child.pid)  # before telemetry looks up its cgroups (on_start)
        pumps = [] if through else [_pump(child.stdout, "stdout", on_output),
                                    _pump(child.stderr, "stderr", on_output)]
        old = relay_signals(child)
        fg = _foreground()
        try:
            if on_start is not None:
                on_start(Started(child.pid, enforcement, lambda sig: _stop(child, sig)))
            code = child.wait()
            for t in pumps:
                t.join()
        finally:
            _foreground(fg)  # ours again, had the supervisor no time to give it back
            restore_signals(old)
            if child.poll() is None:
                _stop(child, signal.SIGKILL)
                child.wait()
            os.close(lifeline_w)
            rc.cleanup()
        return RunResult(128 - code if code < 0 else code, enforcement)

    def leftovers(self) -> list[Leftover]:
        """Run cgroups (`launcher-PID-RUN`) whose launcher is gone, and empty leaves
        (`launcher-leaf`) a launcher moved its processes into and could not undo."""
        from launcher.cgroups.placement import empty_leaves

        out = []
        try:
            leaves = empty_leaves(self.cgroup_root)
        except Exception:  # noqa: BLE001 - no readable cgroups: nothing left behind there
            leaves = []
        for d in leaves:
            out.append(Leftover("cgroup-leaf", str(d), f"empty; {d.parent} keeps controllers "
                                f"on for it, so no process can join {d.parent}", idle=True))
        for d in _run_cgroup_dirs(self.cgroup_root):
            pid = d.name.split("-")[1]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                procs = procs_of(d)
                out.append(Leftover("cgroup", str(d), f"{len(procs)} process(es) in it",
                                    idle=not procs))
        return out

    def remove(self, leftover: Leftover) -> None:
        d = Path(leftover.ident)
        if leftover.kind == "cgroup-leaf":  # the caller's cgroup held only launcher: as found
            on = (d.parent / "cgroup.subtree_control").read_text().split()
            if not undo_leaf(d.parent, on, d):
                raise EngineError(f"cannot undo the leaf move into {d}: another cgroup below "
                                  f"{d.parent} needs its controllers, or it is not writable")
            return
        for _ in range(100):
            kill_all(d)
            try:
                d.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.05)
        raise EngineError(f"cannot remove {d}: processes remain in it")


def gpu_environment(spec: RunSpec) -> dict[str, str]:
    """The supervisor's environment with exactly the run's GPUs visible: a vendor's variables
    for the chosen ones, every other vendor's (and, with none chosen, all) hidden; variables
    only a container runtime reads are left as inherited."""
    env = dict(spec.supervisor_env())
    chosen = get_vendor(spec.gpus.vendor)
    for vendor in gpu_vendors():
        for name in vendor.container_only:
            env.pop(name, None)
        if vendor.name != chosen.name or not spec.gpus.ids:
            env.update(vendor.hidden())
    if spec.gpus.ids and not spec.gpus.all:
        env.update(chosen.visible(spec.gpus.ids))
    return env


def _run_cgroup_dirs(root: Path) -> list[Path]:
    """Run cgroups wherever the placement rule may have put them: beside the caller's cgroup
    or its leaf, or under any of its ancestors, in every hierarchy."""
    from launcher.cgroups.placement import search_dirs

    try:
        parents = search_dirs(root)
    except Exception:  # noqa: BLE001 - no readable cgroups: nothing left behind there
        return []
    found = {d for p in parents for d in p.glob("launcher-*-*") if d.is_dir()}
    return sorted(found)


def _stop(child: subprocess.Popen[bytes], sig: int) -> None:
    """A signal for the supervisor; SIGKILL for its whole process group (the workload too)."""
    if child.poll() is not None:
        return  # reaped: its pid, and its group's, may be someone else's now
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if sig == signal.SIGKILL:
            os.killpg(child.pid, sig)
        else:
            child.send_signal(sig)


def inherited_fds() -> list[int]:
    """The descriptors above 2 this process would pass to any command it ran: the caller's
    (`5>f`, `<(...)`); launcher's own are close-on-exec (PEP 446)."""
    out = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            with contextlib.suppress(OSError):
                if os.get_inheritable(fd):
                    out.append(fd)
    return out


def _foreground(pgid: int | None = None) -> int | None:
    """This process's group, where it holds the controlling terminal's foreground; with
    `pgid`, the foreground given back to it where another group holds it now."""
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if pgid is None:
            return os.getpgrp() if os.tcgetpgrp(fd) == os.getpgrp() else None
        if os.tcgetpgrp(fd) != pgid:
            os.tcsetpgrp(fd, pgid)  # SIGTTOU is ignored meanwhile (relay_signals)
        return pgid
    except OSError:
        return None
    finally:
        os.close(fd)


def relay_signals(child: subprocess.Popen[bytes]) -> dict[int, Any]:
    """What a shell's job gets, relayed to the supervisor (it relays on to the workload):
    the stop signals, SIGHUP, SIGQUIT, SIGUSR1/2 and SIGWINCH; SIGCONT (`fg` after a Ctrl-Z
    stopped us) too, so that the workload goes on. SIGTTOU and SIGTTIN are ignored: launcher
    writes its lines from the background while the workload holds the terminal, even under
    `stty tostop`. Main thread only (Python allows no other); what to restore."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}

    def relay(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
            signal.SIGUSR2, signal.SIGWINCH, signal.SIGCONT)
    old: dict[int, Any] = {s: signal.signal(s, relay) for s in sigs}
    for s in (signal.SIGTTOU, signal.SIGTTIN):
        old[s] = signal.signal(s, signal.SIG_IGN)
    return old


def _hard_limit(res: int) -> int | None:
    hard = resource.getrlimit(res)[1]
    return None if hard == resource.RLIM_INFINITY else hard


def _pump(stream: IO[bytes] | None, name: str, sink: OutputSink) -> threading.Thread:
    def loop() -> None:
        assert stream is not None
        try:
            for chunk in iter(lambda: stream.read1(65536), b""):  # type: ignore[attr-defined]
                sink(name, chunk)
        except OutputClosed:
            stream.close()  # the workload's next write meets a closed pipe (SIGPIPE)

    t = threading.Thread(target=loop, daemon=True, name=f"launcher-{name}")
    t.start()
    return t
