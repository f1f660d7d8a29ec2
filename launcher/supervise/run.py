"""One supervised run, as explicit stages: prepared (the environment, the cgroups, or a refusal),
spawned (the workload in a process group of its own, holding the terminal), ended (one loop of
dispatchers until it exits: its output, the lifeline, signals, the watch's ticks), recorded
(the closing sentence, the exit file, the record); one try/finally releases what the run
took. Nothing travels through module globals or os.environ."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import Any

from launcher import contract as c
from launcher.proctree import is_init
from launcher.supervise.diagnose import KernelCounters, diagnose, read_counters
from launcher.supervise.evidence import Peaks, Start
from launcher.supervise.loop import RELAYED
from launcher.supervise.start import Prepared, Refused, prepare

FOLLOW_S = 0.1  # between two looks at a terminal's size, where its SIGWINCH is not ours


class Voice:
    """The supervisor's lines: in order with the workload's stderr where its output passes
    through us (never refused by a full pipe, on a line of their own), else to stderr; with
    stderr closed, nowhere (not stdout)."""

    def __init__(self) -> None:
        self.pump: Any = None

    def __call__(self, msg: str) -> None:
        if self.pump is not None and self.pump.say(f"launcher: {msg}\n".encode()):
            return
        if sys.stderr is None:
            return
        with contextlib.suppress(OSError, ValueError):
            print(f"launcher: {msg}", file=sys.stderr, flush=True)


class Spawned:  # (plain classes: dataclasses costs ~8 ms of every container start)
    def __init__(self, pid: int, before: KernelCounters, start: Start, sampled: Peaks) -> None:
        self.pid = pid
        self.before = before
        self.start = start  # the limits it starts under
        self.sampled = sampled  # its threads and address space, for the diagnosis


class Ended:
    def __init__(self, code: int, signal: int | None, launcher_gone: bool = False) -> None:
        self.code = code  # the exit status: 128 + N for a signal
        self.signal = signal  # N, where it died of one
        self.launcher_gone = launcher_gone


class Run:
    def __init__(self, cmd: list[str], environ: dict[str, str]) -> None:
        self.cmd = cmd
        self.environ = environ
        self.say = Voice()
        self.exit_file = environ.get(c.EXIT_FILE)
        self.quiet = c.flag(environ, c.QUIET)
        self.cgroups: list[str] = []  # the workload's: the run's (native) or the entrypoint's
        self.undo = environ.get(c.CGROUP_UNDO, "")
        self.watched: Any = None  # lazy.LazyWatcher
        self.pump: Any = None  # pump.Pump
        self.foreground: Any = None  # terminal.Foreground
        self.entry_cgroups: list[str] = []  # the entrypoint's own (a container's)
        self.mask: set[signal.Signals] = set()  # this process's, which the workload gets
        self.died_of: int | None = None  # the signal the workload died of, to end by
        self.lifeline: int | None = None  # the FIFO's fd, once opened
        self.left: list[str] = []  # the run's v1 memory cgroups, left while the workload runs
        self.console = False  # the workload's controlling terminal is our pseudo-terminal

    def __call__(self) -> int:
        prepared = prepare(self.environ, self.say)
        if isinstance(prepared, Refused):
            return self.not_started(prepared.status, prepared.words)
        try:
            return self._run(prepared)
        finally:
            if self.pump is not None and not self.pump.closed:
                self.pump.close()
            self.release()

    def _run(self, p: Prepared) -> int:
        from launcher.supervise import lifeline
        from launcher.supervise.indexed import from_index

        self.cgroups = c.decode_paths(self.environ.get(c.RUN_CGROUPS, "")) or p.cgroups
        self.undo = self.undo or p.undo
        self.entry_cgroups = p.cgroups
        cmd, env = from_index(self.cmd, p.env)  # a Kubernetes Indexed Job's chunk
        record_dir = env.pop(c.RECORD_DIR, None)  # the watch's folder, not the workload's
        if record_dir:
            self.environ[c.RECORD_DIR] = record_dir
        if env.get(c.CHUNK_COMMITTED):
            return self.not_started(0, f"chunk {env[c.CHUNK_INDEX]}: its output is committed "
                                       f"already ({env[c.CHUNK_COMMITTED]}/out, an earlier "
                                       f"pod's): nothing to run")
        # the workload's cgroups (a native run's, or the entrypoint's own), CPUs and rlimits,
        # taken by this process before the workload starts, which inherits them
        failed = lifeline.enter(self.environ, self.cgroups)
        if failed:
            return self.not_started(1, f"error: {failed}")
        lifeline.become_subreaper()  # the workload's descendants stay below us
        self.watch(p.recipe, cmd)
        from launcher.supervise.spawn import NotRunnable

        try:
            spawned = self.spawn(cmd, env)
        except NotRunnable as exc:
            return self.not_started(exc.status, exc.words)
        ended = self.wait(spawned)
        return self.record(spawned, ended, env)

    def watch(self, recipe: Any, cmd: list[str]) -> None:
        """The watch (lazy.LazyWatcher) and the pump that gives it the workload's output, where
        it runs (psutil: checked, not imported, before the workload starts; without it the
        words alone); none where it is off, or cannot start here (said: the workload runs with
        its caps all the same)."""
        import importlib.util

        from launcher.telemetry.watch_settings import is_off

        # the one version check: 3.7 runs the caps part; the watch's modules need 3.8
        if sys.version_info < (3, 8):  # noqa: UP036 - an image's python3, not launcher's
            if not is_off(self.environ):  # not turned off: say why not
                self.say(f"note: growth is not watched here: this image's python3 is "
                         f"{'.'.join(map(str, sys.version_info[:3]))}; the watch needs 3.8 "
                         f"or newer")
            return
        try:
            from launcher.supervise.lazy import LazyWatcher
            from launcher.supervise.pump import Pump
            from launcher.telemetry.watch_settings import WatchSettings

            settings = WatchSettings.from_env(self.environ, recipe, self.say)
            if settings is None:
                return
            if importlib.util.find_spec("psutil") is None:  # its words are read all the same
                if not self.quiet:
                    self.say("note: growth is not watched and the run record has no samples "
                             "here: this image lacks psutil (images `launcher build` makes "
                             "have it; or `pip install psutil`)")
                settings.sample = False
            self.watched = LazyWatcher(settings, cmd, self.say, self.environ)
            self.pump = self.say.pump = Pump(self.watched.output,
                                             one_stream=c.flag(self.environ, c.ONE_STREAM))
        except Exception as exc:  # noqa: BLE001 - an old Python, no pseudo-terminal: unwatched
            self.watched = self.pump = self.say.pump = None
            self.say(f"warning: growth is not watched in this run ({type(exc).__name__}: "
                     f"{exc})")

    def spawn(self, cmd: list[str], env: dict[str, str]) -> Spawned:
        """The workload started in a process group of its own, holding the terminal's
        foreground where our job holds it. The signals to relay are held from before the
        start until their handlers are set, so that one sent as it starts is relayed, not
        lost; the workload starts with the mask this process had."""
        from launcher.supervise.spawn import OPEN, spare_from_oom, spawn
        from launcher.supervise.terminal import Foreground

        self.foreground = Foreground()
        before = read_counters()
        start = Start(env)
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, (*RELAYED, signal.SIGCONT))
        actions: list[Any] = []
        if self.lifeline_fd() == 0:  # stdin is launcher's: the workload's is /dev/null
            actions.append((OPEN, 0, os.devnull, os.O_RDONLY, 0))
        actions += self.pump.file_actions() if self.pump is not None else []
        console = self.pump.console() if self.pump is not None else None
        if console is not None:  # the workload's own terminal: no foreground to hand
            self.foreground.close()
            self.console = True
        try:
            pid = spawn(cmd, env, actions, mask, self.say, console=console)
        except BaseException:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            raise
        if not spare_from_oom() and self.environ.get(c.RUN_CGROUPS):
            from launcher.supervise.lifeline import leave_v1_memory

            self.left = leave_v1_memory(self.cgroups)
        self.foreground.give(pid)
        if self.pump is not None:
            self.pump.spawned()
        self.mask = mask
        return Spawned(pid, before, start, Peaks(pid))

    def lifeline_fd(self) -> int | None:
        """launcher's pipe: an inherited fd (native), a FIFO it holds open (a container with
        -i or -t), or stdin (any other container launcher started); None: no launcher."""
        if self.environ.get(c.LIFELINE_FD, "").isdigit():
            return int(self.environ[c.LIFELINE_FD])
        if self.environ.get(c.LIFELINE_PATH):
            if self.lifeline is None:
                try:
                    self.lifeline = os.open(self.environ[c.LIFELINE_PATH],
                                            os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                except OSError as exc:
                    self.say(f"warning: launcher's lifeline {self.environ[c.LIFELINE_PATH]}: "
                             f"{exc.strerror}; the run outlives launcher if it is killed")
                    self.lifeline = -1
            return self.lifeline if self.lifeline >= 0 else None
        return 0 if self.environ.get(c.WATCH_STDIN) == "1" else None

    def wait(self, s: Spawned) -> Ended:
        """One loop until the workload's process ends (or launcher goes away first: the tree
        stopped); then nothing it started outlives it, and its pipes are drained."""
        from launcher.supervise import lifeline
        from launcher.supervise.loop import Loop

        tick = s.sampled.sample
        if self.watched is not None:  # the watch starts a moment after the workload
            self.watched.spawned(s.pid, self.cgroups)
            s.sampled.watched = True
            tick = both(s.sampled.sample, self.watched.tick,
                        self.pump.tail if self.pump is not None else None,
                        self._size_follower(s.pid))
        dispatchers: list[Any] = [self.pump] if self.pump is not None else []
        loop = Loop(s.pid, dispatchers, tick, self.foreground,
                    on_signal=self._on_signal)
        fd = self.lifeline_fd()
        if fd is not None:
            dispatchers.append(lifeline.Lifeline(fd, lambda: setattr(loop, "gone", True),
                                                 self._reader_gone))
        for sig in (*RELAYED, signal.SIGCHLD, signal.SIGCONT):
            signal.signal(sig, loop.signal)
        signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)  # any held meanwhile: relayed
        status = loop.run()
        if status is None:  # launcher died first: the tree is stopped; leave nothing behind
            self.release(launcher_gone=True)
            return Ended(128 + signal.SIGTERM, None, launcher_gone=True)
        if self.watched is not None:
            self.watched.exited()
        lifeline.stop_tree(grace=1.0, reap=True)  # nothing the workload started outlives it
        self.foreground.close()  # the terminal back to the job before our last lines
        if self.pump is not None:  # what its pipes still hold, before the closing sentence
            self.pump.drain()
        if os.WIFSIGNALED(status):
            return Ended(128 + os.WTERMSIG(status), os.WTERMSIG(status))
        return Ended(os.WEXITSTATUS(status), None)

    def _size_follower(self, pid: int) -> Any:
        """A terminal's resize sends SIGWINCH to its foreground, the workload's group, never
        to us: the pseudo-terminals its output goes through follow the real one's size, looked
        at FOLLOW_S apart, and the workload is told again once they have (at the kernel's
        signal it may have read the old size). None without them, or on a console of its own
        (we hold the container's terminal then: its SIGWINCH is ours, `_on_signal`)."""
        pump = self.pump
        if pump is None or not pump.masters or self.console:
            return None

        def follow() -> float:
            if pump.follow():
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGWINCH)
            return FOLLOW_S

        return follow

    def _on_signal(self, sig: int) -> None:
        if sig == signal.SIGWINCH and self.pump is not None:
            self.pump.resize()  # the workload's terminal takes the new size first

    def _reader_gone(self, stream: str) -> None:
        if self.pump is not None:
            self.pump.gone(stream)

    def record(self, s: Spawned, e: Ended, env: dict[str, str]) -> int:
        """The closing sentence, a pod's termination message and chunk, the exit file."""
        from launcher.supervise.indexed import commit_in_pod
        from launcher.supervise.record import at_start, exit_record
        from launcher.supervise.watcher import termination_message

        if e.launcher_gone:
            return e.code
        if self.left:  # the run's memory cgroup again: its counters are read from ours
            from launcher.supervise.lifeline import join

            join(self.left)
        after = read_counters()
        self.release()  # its own cgroups: out of them, and the container's cgroup as it was
        rc = -e.signal if e.signal else e.code
        reason, sentence = diagnose(rc, s.before, after, s.start, s.sampled)
        limits = at_start(s.start, after, s.sampled)
        code, growth, folder = e.code, None, None
        if self.watched is not None:
            # the nearest cgroup's peaks are a container's own; natively, the session's
            kernel = {"pids_peak_kernel": after.pids_peak_nearest,
                      "memory_peak_kernel": after.memory_peak} if is_init() else dict.fromkeys(
                ("pids_peak_kernel", "memory_peak_kernel"))
            code, sentence, growth, folder = self.watched.finish(
                code, sentence, {"reason": reason, "diagnosis": sentence,
                                 "limits_at_start": limits}, kernel)
        if code != 0 or not self.quiet:
            self.say(sentence)
        termination_message(sentence)
        code, committed = commit_in_pod(env, code)  # a Kubernetes chunk's output, into place
        if committed and (code != 0 or not self.quiet):
            self.say(committed)
        if self.pump is not None:  # our lines passed on too, however long the reader pauses
            self.pump.drain()
            self.pump.close()
        if self.exit_file:
            c.write_exit(self.exit_file, {
                **exit_record(code, sentence, s.before, after), "reason": reason,
                "limits_at_start": limits, "growth": growth, "workload_status": e.code,
                "record": folder, "signal": self._ends_by(e, code)})
        self.died_of = self._ends_by(e, code)
        return code

    @staticmethod
    def _ends_by(e: Ended, code: int) -> int | None:
        """The signal to end by: the workload's, where its status was not replaced (a stop
        before a limit is 75) and it is one that stops a command (record.ENDS_BY)."""
        from launcher.contract import ENDS_BY

        return e.signal if e.signal in ENDS_BY and code == e.code else None

    def not_started(self, code: int, sentence: str) -> int:
        self.say(sentence)
        if self.exit_file:
            c.write_exit(self.exit_file, {"status": code, "diagnosis": sentence,
                                          "started": False})
        return code

    def release(self, launcher_gone: bool = False) -> None:
        """Once: the entrypoint's own cgroups gone and the container's cgroup as it was; where
        launcher went away first, the run's cgroups too (the launcher that would have is
        gone)."""
        from launcher.cgroups.leaf import undo_leaves
        from launcher.supervise import lifeline

        if self.foreground is not None:
            self.foreground.close()
        dirs = self.cgroups if launcher_gone else self.entry_cgroups
        if dirs:
            lifeline.leave_cgroups(dirs)
        if dirs or launcher_gone:
            undo_leaves(self.undo)
        self.cgroups, self.entry_cgroups, self.undo = [], [], ""


def both(*ticks: Any) -> Any:
    """Ticks as one, each called when it is due (the loop also wakes for output): the sooner
    of their next times. A tick returns the seconds until it is due again."""
    import time

    each = [t for t in ticks if t is not None]
    due = [0.0] * len(each)

    def tick() -> float:
        now = time.monotonic()
        for i, t in enumerate(each):
            if now >= due[i]:
                due[i] = now + t()
        return max(0.0, min(due) - now)

    return tick
