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

from launcher.supervise.diagnose import Counters, explain, read_counters

CAPS = Path(os.environ.get("LAUNCHER_CAPS", "/etc/launcher/caps.json"))
BASE_ENV = Path("/etc/launcher/base-env.json")
FORWARD = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
           signal.SIGUSR2, signal.SIGWINCH)


def say(msg: str) -> None:
    with contextlib.suppress(OSError):  # stderr is gone with launcher: say nothing
        print(f"launcher: {msg}", file=sys.stderr, flush=True)


def prepare_env() -> dict[str, str] | int:
    """Resolve the caps here (image started by docker, compose or a cloud) and return the
    child's environment, or an exit status when the workload must not start."""
    from launcher.errors import LauncherError
    from launcher.supervise.apply import (
        apply_rlimits,
        child_env,
        load_recipe,
        read_base_env,
        resolve,
    )
    from launcher.supervise.report import report

    quiet = os.environ.get("LAUNCHER_QUIET", "") not in ("", "0")
    try:
        environ = dict(os.environ)
        caps = resolve(load_recipe(CAPS), environ, base_env=read_base_env(BASE_ENV))
    except (OSError, ValueError, LauncherError) as exc:
        say(f"error: cannot apply the caps from {CAPS}: {exc}")
        return 1
    report(caps, quiet, say)
    if caps.verdict.level == "refuse" and os.environ.get("LAUNCHER_STRICT") not in (None, "", "0"):
        say("LAUNCHER_STRICT is set: not starting the workload.")
        return 1
    for note in apply_rlimits(caps):
        say(f"warning: {note}")
    return child_env(caps, dict(os.environ))


def resolved_env() -> dict[str, str]:
    """`launcher run` resolved the caps for this container and set its limits: take its
    environment as given, less the stale variables it names."""
    env = dict(os.environ)
    for name in env.pop("LAUNCHER_REMOVE", "").split(","):
        env.pop(name, None)
    for name in ("LAUNCHER_RESOLVED", "LAUNCHER_WATCH_STDIN", "LAUNCHER_RUN_CGROUPS",
                 "LAUNCHER_EXIT_FILE", "LAUNCHER_CPUSET", "LAUNCHER_RLIMITS"):
        env.pop(name, None)
    return env


def run(cmd: list[str]) -> int:
    from launcher.supervise import lifeline

    quiet = os.environ.get("LAUNCHER_QUIET", "") not in ("", "0")
    watch = os.environ.get("LAUNCHER_WATCH_STDIN") == "1"
    run_cgroups = [d for d in os.environ.get("LAUNCHER_RUN_CGROUPS", "").split(":") if d]
    env = resolved_env() if os.environ.get("LAUNCHER_RESOLVED") == "1" else prepare_env()
    if isinstance(env, int):
        return env
    from launcher.supervise.indexed import COMMITTED, commit_in_pod, from_index

    cmd, env = from_index(cmd, env)  # a Kubernetes Indexed Job's chunk, from its index
    if env.get(COMMITTED):
        say(f"chunk {env['LAUNCHER_CHUNK_INDEX']}: its output is committed already "
            f"({env[COMMITTED]}/out, an earlier pod's): nothing to run")
        return 0
    failed = lifeline.enter(dict(os.environ))  # a native run's cgroups, CPUs and rlimits
    if failed:
        say(f"error: {failed}")
        return 1
    lifeline.become_subreaper()  # the workload's descendants stay below us
    before = read_counters()
    try:  # posix_spawnp: no subprocess import (~10 ms of every container start)
        actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0)] if watch else []
        pid = os.posix_spawnp(cmd[0], cmd, env, file_actions=actions)
    except OSError as exc:
        say(f"cannot run {cmd[0]!r}: {exc.strerror}")
        return 127 if isinstance(exc, FileNotFoundError) else 126

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)

    for sig in FORWARD:
        signal.signal(sig, forward)
    status = lifeline.wait_for(pid, watch)  # with `watch`: stdin's end means launcher is gone
    if status is None:  # launcher died first: the tree is stopped; leave nothing behind
        lifeline.leave_cgroups(run_cgroups)
        return 128 + signal.SIGTERM
    rc = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    lifeline.stop_tree(grace=1.0, reap=True)  # nothing the workload started outlives it
    after = read_counters()
    sentence = explain(rc, before, after)
    if rc != 0 or not quiet:
        say(sentence)
    code = 128 - rc if rc < 0 else rc
    code, committed = commit_in_pod(env, code)  # a Kubernetes chunk's output, into place
    if committed and (code != 0 or not quiet):
        say(committed)
    if os.environ.get("LAUNCHER_EXIT_FILE"):
        write_exit_file(Path(os.environ["LAUNCHER_EXIT_FILE"]), code, sentence, before, after)
    return code


def write_exit_file(path: Path, code: int, sentence: str, before: Counters,
                    after: Counters) -> None:
    """How the workload ended, for a job's ledger, written whole (it may outlive launcher:
    a rerun reads it to tell a finished chunk from an interrupted one)."""
    import json
    import resource

    data = {"status": code, "diagnosis": sentence,
            "oom": (after.oom_kills or 0) > (before.oom_kills or 0),
            "memory_peak": after.memory_peak,
            "maxrss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}
    tmp = path.with_name(path.name + ".tmp")
    with contextlib.suppress(OSError):
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)


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
