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
import subprocess
import sys
from pathlib import Path

from launcher.errors import LauncherError
from launcher.supervise.apply import (
    apply_rlimits,
    child_env,
    dump_env,
    load_recipe,
    read_base_env,
    resolve,
)
from launcher.supervise.diagnose import explain, read_counters

CAPS = Path(os.environ.get("LAUNCHER_CAPS", "/etc/launcher/caps.json"))
BASE_ENV = Path("/etc/launcher/base-env.json")
FORWARD = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
           signal.SIGUSR2, signal.SIGWINCH)


def say(msg: str) -> None:
    print(f"launcher: {msg}", file=sys.stderr, flush=True)


def report(caps, quiet: bool) -> None:  # type: ignore[no-untyped-def]
    t = caps.threads
    if not quiet:
        src = caps.env["OMP_NUM_THREADS"].source if "OMP_NUM_THREADS" in caps.env else ""
        say(f"profile {caps.profile}, framework {caps.framework}: OMP/MKL/OpenBLAS "
            f"{t['omp']}, TF intra/inter {t['intra_op']}/{t['inter_op']} ({src}); "
            f"~{caps.estimate['per_process']} threads per process, budget "
            f"{caps.budget['available']} ({caps.budget['binding']})")
    for name, s in caps.env.items():
        if s.replaced is not None:
            new = "removed it" if s.value is None else f"set {s.value}"
            say(f"{name}={s.replaced} was inherited; {new} ({s.source})")
    for reason in caps.verdict.reasons:
        level = "refused" if caps.verdict.level == "refuse" else "warning"
        say(f"{level}: {reason}")


def run(cmd: list[str]) -> int:
    quiet = os.environ.get("LAUNCHER_QUIET", "") not in ("", "0")
    try:
        environ = dict(os.environ)
        caps = resolve(load_recipe(CAPS, environ), environ, base_env=read_base_env(BASE_ENV))
    except (OSError, ValueError, LauncherError) as exc:
        say(f"error: cannot apply the caps from {CAPS}: {exc}")
        return 1
    report(caps, quiet)
    if caps.verdict.level == "refuse" and os.environ.get("LAUNCHER_STRICT") not in (None, "", "0"):
        say("LAUNCHER_STRICT is set: not starting the workload.")
        return 1
    for note in apply_rlimits(caps):
        say(f"warning: {note}")
    before = read_counters()
    try:
        child = subprocess.Popen(cmd, env=child_env(caps, dict(os.environ)))
    except OSError as exc:
        say(f"cannot run {cmd[0]!r}: {exc.strerror}")
        return 127 if isinstance(exc, FileNotFoundError) else 126

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signum)

    for sig in FORWARD:
        signal.signal(sig, forward)
    status = wait_reaping(child.pid)
    rc = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    sentence = explain(rc, before, read_counters())
    if rc != 0 or not quiet:
        say(sentence)
    return 128 - rc if rc < 0 else rc


def wait_reaping(pid: int) -> int:
    """Wait for `pid`, reaping every other child that exits meanwhile (PID 1's duty)."""
    while True:
        try:
            done, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 0
        except InterruptedError:
            continue
        if done == pid:
            return status


def main(argv: list[str]) -> int:
    if argv[:1] == ["--record-base-env"]:
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
