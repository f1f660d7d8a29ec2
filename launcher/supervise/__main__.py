"""`python3 -m launcher.supervise [--] CMD...`: the entrypoint of every launcher container.

Resolves the caps recipe against the container's own cgroup, sets every managed variable
(an explicit -e wins; a stale value from the base image does not), lowers soft ulimits, runs
the pre-flight, then runs CMD as its child: forwards signals, reaps zombies (it is PID 1), and
when CMD ends says why in one sentence and exits with CMD's status.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Any

from launcher import contract as c
from launcher.supervise.diagnose import Counters, diagnose, read_counters
from launcher.supervise.evidence import Start, Watch

CAPS = Path(os.environ.get(c.CAPS, c.CAPS_FILE))
BASE_ENV = Path(c.BASE_ENV_FILE)
FORWARD = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
           signal.SIGUSR2, signal.SIGWINCH)


PUMP: Any = None  # the workload's output through us (pump.Pump), while it runs


def say(msg: str) -> None:
    if PUMP is not None and PUMP.say(f"launcher: {msg}\n".encode()):
        return  # in order with the workload's stderr, never refused by a full pipe
    if sys.stderr is None:  # started with stderr closed: nowhere to say it (not stdout)
        return
    with contextlib.suppress(OSError):  # stderr is gone with launcher: say nothing
        print(f"launcher: {msg}", file=sys.stderr, flush=True)


def prepare_env() -> tuple[dict[str, str], list[str], Any] | tuple[int, str]:
    """Resolve the caps here (image started by docker, compose or a cloud) and return the
    child's environment, the cgroups it must join and the resolved recipe (its profile's
    growth keys: the watch's), or an exit status and why when the workload must not start
    (the profile decides: `limits.require`, `limits.fit`)."""
    import dataclasses

    from launcher.caps.fit import apply as apply_fit
    from launcher.caps.fit import fit_to_budget
    from launcher.errors import LauncherError
    from launcher.supervise.apply import (
        apply_rlimits,
        child_env,
        load_recipe,
        read_base_env,
        resolve,
    )
    from launcher.supervise.enforce import enforce
    from launcher.supervise.report import report

    quiet = c.flag(dict(os.environ), c.QUIET)
    try:
        environ = dict(os.environ)
        r = resolve(load_recipe(CAPS), environ, base_env=read_base_env(BASE_ENV))
    except (OSError, ValueError, LauncherError) as exc:
        return 1, f"error: cannot apply the caps from {CAPS}: {exc}"
    entry = enforce(r.caps, r.facts.cgroup)
    if entry.advisory and r.profile.get("limits.require"):
        entry.release()
        return 1, (f"refused (limits.require): {entry.shortfall()} cannot be enforced here; "
                   f"not started")
    r = dataclasses.replace(r, caps=entry.mark_budget(r.caps))
    if r.caps.verdict.level == "refuse" and r.profile.get("limits.fit"):
        fit = fit_to_budget(r)
        if fit is not None:
            r = apply_fit(r, fit, "limits.fit")
            say(f"limits.fit: {fit.describe()}")
    override = "limits.override" if r.profile.get("limits.override") else None
    report(r.caps, quiet, say, overridden_by=override)
    for line in entry.lines() if not quiet else ():
        say(line)
    if entry.advisory:
        say(f"warning: advisory only: {entry.shortfall()} cannot be enforced here")
    if r.caps.verdict.level == "refuse" and not override:
        entry.release()
        hint = "" if r.profile.get("limits.fit") else (
            "; `limits: {fit: true}` in the profile shrinks the pools instead")
        return 1, f"refused: not started{hint}"
    warnings, notes = apply_rlimits(r.caps, r.profile.from_shipped)
    for line in warnings:
        say(f"warning: {line}")
    for line in notes if c.flag(dict(os.environ), c.VERBOSE) else ():
        say(line)
    dirs = sorted({str(d) for d in entry.cgroup.dirs.values()}) if entry.cgroup else []
    env = child_env(r.caps, dict(os.environ))
    if entry.cgroup is not None and entry.cgroup.undo:
        os.environ[c.CGROUP_UNDO] = c.encode_undo(entry.cgroup.undo)
    return env, dirs, r


def resolved_env() -> dict[str, str]:
    """`launcher run` resolved the caps for this container and set its limits: take its
    environment as given, less the stale variables it names."""
    env = dict(os.environ)
    for name in c.decode_names(env.get(c.REMOVE, "")) + list(c.PRIVATE):
        env.pop(name, None)
    return env


def run(cmd: list[str]) -> int:
    from launcher.cgroups.leaf import undo_leaves
    from launcher.supervise import lifeline

    quiet = c.flag(dict(os.environ), c.QUIET)
    watch = os.environ.get(c.WATCH_STDIN) == "1"
    run_cgroups = c.decode_paths(os.environ.get(c.RUN_CGROUPS, ""))
    exit_file = os.environ.get(c.EXIT_FILE)
    prepared = (resolved_env(), [], None) if os.environ.get(c.RESOLVED) == "1" else (
        prepare_env())
    if isinstance(prepared[0], int):
        return not_started(exit_file, *prepared)  # type: ignore[arg-type]
    env, entry_cgroups, recipe = prepared  # type: ignore[misc]
    if entry_cgroups:  # the entrypoint's own cgroups for the workload, joined below
        os.environ[c.RUN_CGROUPS] = c.encode_paths(entry_cgroups)

    def release() -> None:
        """The entrypoint's own cgroups gone, the container's cgroup as it was."""
        if entry_cgroups:
            lifeline.leave_cgroups(entry_cgroups)
            undo_leaves(os.environ.get(c.CGROUP_UNDO, ""))

    from launcher.supervise.indexed import commit_in_pod, from_index

    cmd, env = from_index(cmd, env)  # a Kubernetes Indexed Job's chunk, from its index
    if env.get(c.RECORD_DIR):  # its record's folder: the watch's, not the workload's
        os.environ[c.RECORD_DIR] = env.pop(c.RECORD_DIR)
    if env.get(c.CHUNK_COMMITTED):
        say(f"chunk {env[c.CHUNK_INDEX]}: its output is committed already "
            f"({env[c.CHUNK_COMMITTED]}/out, an earlier pod's): nothing to run")
        release()
        return 0
    failed = lifeline.enter(dict(os.environ))  # a native run's cgroups, CPUs and rlimits
    if failed:
        release()
        return not_started(exit_file, 1, f"error: {failed}")
    lifeline.become_subreaper()  # the workload's descendants stay below us
    global PUMP
    watched, pump = watching(recipe, cmd)
    PUMP = pump
    before = read_counters()
    start = Start(env)  # the limits the workload starts under
    # the signals to forward are held from here until their handlers are set, so that one
    # sent as the workload starts is forwarded, not lost (ignored, where launcher started
    # with SIGINT ignored); the workload starts with the mask this process had
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, FORWARD)
    try:  # posix_spawnp: no subprocess import (~10 ms of every container start)
        spawn = getattr(os, "posix_spawnp", None)  # None: Python 3.7's os (fork and exec)
        actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0)] if watch and spawn else []
        actions += pump.file_actions() if pump is not None else []
        # the signals Python ignores go back to their defaults, as subprocess's
        # restore_signals does: a workload in a pipeline dies of SIGPIPE, one past
        # RLIMIT_FSIZE of SIGXFSZ; and so do the stop signals launcher forwards, which a
        # background job of a script (`launcher run ... &`) inherits ignored: Ctrl-C and kill
        # must still stop the workload
        defaults = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGQUIT,
                    signal.SIGTERM)
        try:
            pid = spawn(cmd[0], cmd, env, file_actions=actions, setsigdef=defaults,
                        setsigmask=mask) if spawn else fork_exec(cmd, env, watch, defaults, mask)
        except PermissionError:
            from launcher.supervise.causes import clone3_refused

            if not clone3_refused():
                raise
            # posix_spawn is clone3 in glibc >= 2.34, which an old seccomp profile refuses;
            # fork() is clone: the workload starts, and its threads' failure is named
            say("warning: a seccomp filter refuses clone3 here; the workload's threads will "
                "fail to start (glibc creates them with clone3)")
            pid = fork_exec(cmd, env, watch, defaults, mask, actions)
    except OSError as exc:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if pump is not None:
            pump.close()
        release()
        from launcher.supervise.causes import cannot_run

        return not_started(exit_file, 127 if isinstance(exc, FileNotFoundError) else 126,
                           f"cannot run {cmd[0]!r}: {cannot_run(cmd[0], exc)}")

    if pump is not None:
        pump.spawned()

    def forward(signum: int, _frame: object) -> None:
        if signum == signal.SIGWINCH and pump is not None:
            pump.resize()  # the workload's terminal takes the new size first
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)

    for sig in FORWARD:
        signal.signal(sig, forward)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # any held meanwhile: forwarded now
    sampled = Watch(pid)  # its threads and address space, for the diagnosis
    tick = sampled.sample
    if watched is not None:  # the watch starts a moment after the workload (its imports)
        watched.spawned(pid, run_cgroups or entry_cgroups)
        sampled.watched = True
        tick = both(sampled.sample, watched.tick)
    # with `watch`: stdin's end means launcher is gone
    status = lifeline.wait_for(pid, watch, tick, pump)
    if status is None:  # launcher died first: the tree is stopped; leave nothing behind
        if pump is not None:
            pump.close()
        lifeline.leave_cgroups(run_cgroups or entry_cgroups)
        undo_leaves(os.environ.get(c.CGROUP_UNDO, ""))
        return 128 + signal.SIGTERM
    rc = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    if watched is not None:
        watched.exited()
    lifeline.stop_tree(grace=1.0, reap=True)  # nothing the workload started outlives it
    if pump is not None:  # what its pipes still hold, before the closing sentence
        pump.drain()
        pump.close()
    after = read_counters()
    release()  # its own cgroups: out of them, and the container's cgroup as it was
    reason, sentence = diagnose(rc, before, after, start, sampled)
    code = 128 - rc if rc < 0 else rc
    limits = at_start(start, after, sampled)
    growth, workload, folder = None, code, None
    if watched is not None:
        code, sentence, growth, folder = watched.finish(
            code, sentence, {"reason": reason, "diagnosis": sentence,
                             "limits_at_start": limits},
            {"pids_peak_kernel": after.pids_peak_nearest if os.getpid() == 1 else None,
             "memory_peak_kernel": after.memory_peak if os.getpid() == 1 else None})
    if code != 0 or not quiet:
        say(sentence)
    from launcher.supervise.watcher import termination_message

    termination_message(sentence)
    code, committed = commit_in_pod(env, code)  # a Kubernetes chunk's output, into place
    if committed and (code != 0 or not quiet):
        say(committed)
    if exit_file:
        c.write_exit(exit_file, {**exit_record(code, sentence, before, after), "reason": reason,
                                 "limits_at_start": limits, "growth": growth,
                                 "workload_status": workload,
                                 "record": folder})
    return code


def watching(recipe: Any, cmd: list[str]) -> tuple[Any, Any]:
    """The watch (lazy.LazyWatch) and the pump that gives it the workload's output, where it
    runs (psutil: checked, not imported, before the workload starts; without it the words
    alone); (None, None) where it is off, or cannot start here (said: the workload runs with
    its caps all the same)."""
    import importlib.util

    try:
        from launcher.supervise.watcher import settings_of

        # the one version check: 3.7 runs the caps part; the watch's modules need 3.8
        if sys.version_info < (3, 8):  # noqa: UP036 - an image's python3, not launcher's
            if settings_of(dict(os.environ)) is not None:  # not turned off: say why not
                say(f"note: growth is not watched here: this image's python3 is "
                    f"{'.'.join(map(str, sys.version_info[:3]))}; the watch needs 3.8 or newer")
            return None, None
        from launcher.supervise.lazy import LazyWatch
        from launcher.supervise.pump import Pump

        settings = settings_of(dict(os.environ), recipe, say)
        if settings is None:
            return None, None
        if importlib.util.find_spec("psutil") is None:  # its words are read all the same
            say("note: growth is not watched and the run record has no samples here: this "
                "image lacks psutil (images `launcher build` makes have it; or `pip install "
                "psutil`)")
            settings["sample"] = False
        watched = LazyWatch(settings, cmd, say)
        return watched, Pump(watched.output)
    except Exception as exc:  # noqa: BLE001 - an old Python, no pseudo-terminal: unwatched
        say(f"warning: growth is not watched in this run ({type(exc).__name__}: {exc})")
        return None, None


def both(first: Any, second: Any) -> Any:
    """Two ticks as one, each called when it is due (the loop also wakes for output): the
    sooner of their next times."""
    import time

    due = [0.0, 0.0]

    def tick() -> float:
        now = time.monotonic()
        for i, each in enumerate((first, second)):
            if now >= due[i]:
                due[i] = now + each()
        return max(0.0, min(due) - now)

    return tick


def fork_exec(cmd: list[str], env: dict[str, str], devnull_stdin: bool,
              defaults: tuple[signal.Signals, ...], mask: set[signal.Signals],
              actions: list[Any] | None = None) -> int:
    """posix_spawnp's work by fork() and exec (its DUP2 `actions` too): the child's exec
    failure is its exit 127."""
    pid = os.fork()
    if pid:
        return pid
    try:  # pragma: no mutate - the child of a fork
        for sig in defaults:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if devnull_stdin:
            fd = os.open(os.devnull, os.O_RDONLY)
            os.dup2(fd, 0)
        for action in actions or ():
            if action[0] == os.POSIX_SPAWN_DUP2:
                os.dup2(action[1], action[2])
        os.execvpe(cmd[0], cmd, env)
    finally:
        os._exit(127)


def not_started(exit_file: str | None, code: int, sentence: str) -> int:
    say(sentence)
    if exit_file:
        c.write_exit(exit_file, {"status": code, "diagnosis": sentence, "started": False})
    return code


def exit_record(code: int, sentence: str, before: Counters, after: Counters) -> dict[str, object]:
    """How the workload ended (contract.write_exit)."""
    import resource

    return {"status": code, "diagnosis": sentence, "started": True,
            "oom": (after.oom_kills or 0) > (before.oom_kills or 0),
            "memory_peak": after.memory_peak, "pids_peak": after.pids_peak_nearest,
            "maxrss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}


def at_start(start: Start, after: Counters, watch: Watch) -> dict[str, object]:
    """The limits the workload started under and what the samples saw of it: for naming a
    thread failure the samples missed (launcher reads the workload's own words for it)."""
    return {"nproc": start.nproc, "nproc_exempt": start.exempt, "uid": start.uid,
            "uid_tasks_outside": start.outside, "address_space": start.address_space,
            "data": start.data, "stack": start.stack, "threads_max": start.threads_max,
            "pids_max": after.pids_max, "threads_seen": watch.threads,
            "vm_size_seen": watch.vm_size, "vm_data_seen": watch.vm_data}


def main(argv: list[str]) -> int:
    if argv[:1] == ["--record-base-env"]:
        from launcher.supervise.apply import dump_env

        dump_env(Path(argv[1]) if len(argv) > 1 else BASE_ENV)
        return 0
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        say("usage: python3 -m launcher.supervise [--] CMD [ARGS...]")
        return 2
    return run(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
