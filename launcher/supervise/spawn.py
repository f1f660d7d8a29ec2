"""The workload's start: posix_spawnp (no subprocess import: ~10 ms of every container start)
in a process group of its own, with the signal dispositions and mask a shell gives a command.
Standard library only."""

from __future__ import annotations

import os
import signal
from typing import Any

# posix_spawn's file actions (os has them from 3.8; 3.7 starts the workload by fork and exec)
OPEN = getattr(os, "POSIX_SPAWN_OPEN", 0)
DUP2 = getattr(os, "POSIX_SPAWN_DUP2", 2)

# Python ignores SIGPIPE and SIGXFSZ, launcher's supervisor SIGTTOU and SIGTTIN, and a
# background job (`launcher run ... &`) inherits SIGINT and SIGQUIT ignored: the workload gets
# the defaults back, as subprocess's restore_signals does (it dies of SIGPIPE in a pipeline,
# of SIGXFSZ past RLIMIT_FSIZE) and as a shell's foreground command has them (Ctrl-C, Ctrl-Z).
DEFAULTS = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM,
            signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)


class NotRunnable(Exception):  # noqa: N818 - a condition, said as the shell says it
    def __init__(self, status: int, words: str) -> None:
        super().__init__(words)
        self.status, self.words = status, words


def spawn(cmd: list[str], env: dict[str, str], actions: list[Any],
          mask: set[signal.Signals], say: Any, *, console: str | None = None) -> int:
    """Start `cmd` in a new process group (its pid is the group's id); with `console` (a
    terminal's path), in a new session whose controlling terminal it is, on fds 0-2.
    NotRunnable where the shell would say 127 (not found) or 126 (not executable, a bad
    interpreter)."""
    group: dict[str, Any] = {"setpgroup": 0}
    if console is not None:  # opened after setsid, without O_NOCTTY: its controlling one
        actions = [(OPEN, 0, console, os.O_RDWR, 0), (DUP2, 0, 1), (DUP2, 0, 2)]
        group = {"setsid": True}
    if not hasattr(os, "posix_spawnp"):  # Python 3.7's os
        try:
            return fork_exec(cmd, env, mask, actions, new_session=console is not None)
        except OSError as exc:
            raise NotRunnable(127, _words(cmd[0], exc)) from None
    try:
        return os.posix_spawnp(cmd[0], cmd, env, file_actions=actions, setsigdef=DEFAULTS,
                               setsigmask=mask, **group)
    except PermissionError as exc:
        from launcher.supervise.causes import clone3_refused

        if not clone3_refused():
            raise NotRunnable(126, _words(cmd[0], exc)) from None
        # posix_spawn is clone3 in glibc >= 2.34, which an old seccomp profile refuses;
        # fork() is clone: the workload starts, and its threads' failure is named
        say("warning: a seccomp filter refuses clone3 here; the workload's threads will "
            "fail to start (glibc creates them with clone3)")
        return fork_exec(cmd, env, mask, actions, new_session=console is not None)
    except OSError as exc:
        raise NotRunnable(127 if isinstance(exc, FileNotFoundError) else 126,
                          _words(cmd[0], exc)) from None


def fork_exec(cmd: list[str], env: dict[str, str], mask: set[signal.Signals],
              actions: list[Any], new_session: bool = False) -> int:
    """posix_spawnp's work by fork() and exec (its OPEN and DUP2 `actions` too): the child's
    exec failure is its exit 127."""
    pid = os.fork()
    if pid:
        return pid
    try:  # pragma: no mutate - the child of a fork
        os.setsid() if new_session else os.setpgid(0, 0)
        for sig in DEFAULTS:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for action in actions:
            if action[0] == OPEN:
                fd = os.open(action[2], action[3], action[4])
                if fd != action[1]:
                    os.dup2(fd, action[1])
            elif action[0] == DUP2:
                os.dup2(action[1], action[2])
        os.execvpe(cmd[0], cmd, env)
    finally:
        os._exit(127)


def spare_from_oom(proc: str = "/proc") -> bool:
    """Take this process out of the OOM killer's choice (-1000: what conmon sets for itself),
    once the workload has started with the score this process had. A memory limit's kill then
    takes the workload and never the supervisor that records it: in a small cgroup the
    kernel's next kill after the workload's (its file pages still charged) took the
    supervisor too, and the run lost its exit record. False where it is refused (no
    CAP_SYS_RESOURCE: Docker's default capabilities)."""
    try:
        with open(f"{proc}/self/oom_score_adj", "w") as f:
            f.write("-1000")
        return True
    except OSError:
        return False


def _words(name: str, exc: OSError) -> str:
    """What a shell says of a command it cannot run (causes.cannot_run: a script's missing
    `#!` interpreter named)."""
    from launcher.supervise.causes import cannot_run

    return f"cannot run {name!r}: {cannot_run(name, exc)}"
