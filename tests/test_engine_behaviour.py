"""The behaviours every engine owes a `launcher run`, one harness over all of them: the exit
status is the workload's, a limit asked for is enforced and named when it bites, Ctrl-C reaches
the workload and leaves nothing running, so does `kill -9` of launcher, stdout and stderr pass
through unchanged and apart, and what the workload writes into the working folder is the
caller's. Every test runs once per engine of ENGINES; a new engine gets them all by one line
there (test_every_registered_engine_is_in_the_harness says when one is missing). Podman runs
twice: as root, and rootless as a user made for it (tests/rootless.py), whose cgroup limits
Podman keeps only where that user's cgroup controllers allow (on cgroup v1: none), which
launcher must say. An engine that needs a daemon or an image skips with why where it does not
answer; CI fails instead."""

from __future__ import annotations

import grp
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT, need
from tests.docker_helpers import BASE, docker_missing, podman_missing, profile, supervisor_sentence
from tests.polling import wait_until
from tests.rootless import Caller, python_for, rootless_caller

# a thread bomb (tests/test_docker_run.py's): it stops when a thread is refused, or with
# status 0 at 2000 threads (no limit bit: the test fails, the machine lives)
BOMB = ("import threading, time\nwhile threading.active_count() < 2000:\n"
        "    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n")
# 60 threads, more than the pids limit of 50 lets start where it is kept
PAST_50 = ("import threading, time\nfor _ in range(60):\n"
           "    threading.Thread(target=time.sleep, args=(5,), daemon=True).start()\n"
           "print('ran', threading.active_count() - 1, 'threads')\n")
# waits for a signal; on SIGINT its own handler says so, then it ends by the signal, as a
# well-behaved program does (so the status is 128+2); argv[1]: a file made once it waits
WAITS = ("import os, signal, sys, time\n"
         "def handler(signum, frame):\n"
         "    print('handled', signal.Signals(signum).name, flush=True)\n"
         "    signal.signal(signum, signal.SIG_DFL)\n"
         "    os.kill(os.getpid(), signum)\n"
         "signal.signal(signal.SIGINT, handler)\n"
         "open(sys.argv[1], 'w').close()\n"
         "while True:\n"
         "    time.sleep(0.05)\n")


def _containers(cli: str) -> Callable[[str], list[str]]:
    """The containers named `name` the engine `cli` still has, in any state."""
    def held(name: str) -> list[str]:
        found = subprocess.run([cli, "ps", "--all", "--quiet", "--filter", f"name={name}"],
                               capture_output=True, text=True, timeout=60).stdout.split()
        return [f"{cli} container {c}" for c in found]
    return held


def _rootless_containers(name: str) -> list[str]:
    """The containers named `name` the rootless user's Podman still has, in any state."""
    found = _rootless().run("podman", "ps", "--all", "--quiet", "--filter", f"name={name}")
    return [f"rootless podman container {c}" for c in found.stdout.split()]


def _run_cgroups(name: str) -> list[str]:
    """Run cgroups (`launcher-PID-NAME`) under this process's cgroups, v1 or v2."""
    from launcher.probe.cgroup import find_chains

    return [f"run cgroup {d}" for chain in find_chains(Path("/")).values()
            for d in chain.dirs[0].glob(f"launcher-*{name}")]


@dataclass(frozen=True)
class Engine:
    name: str  # as `--runtime` and the engine registry name it
    args: tuple[str, ...]  # what else `launcher run` needs to run it
    missing: Callable[[], str | None]  # why it cannot run here, or None
    held: Callable[[str], list[str]]  # what still holds run NAME (containers, cgroups)
    rootless: bool = False  # launcher runs as the rootless Podman user, not as this process
    key: str = ""  # its name in ENGINES and in test ids, where not `name`

    @property
    def id(self) -> str:
        return self.key or self.name


ENGINES = {e.id: e for e in [
    Engine("native", (), lambda: None, _run_cgroups),
    Engine("docker", ("--image", BASE), docker_missing, _containers("docker")),
    Engine("podman", ("--image", BASE), podman_missing, _containers("podman")),
    Engine("podman", ("--image", BASE), podman_missing, _rootless_containers, rootless=True,
           key="podman-rootless"),
]}


@cache
def _rootless() -> Caller:
    caller = rootless_caller(BASE)
    assert not isinstance(caller, str), caller  # _missing() said why first
    return caller


@cache
def _missing(key: str) -> str | None:
    why = ENGINES[key].missing()
    if why is None and ENGINES[key].rootless:
        caller = rootless_caller(BASE)
        why = caller if isinstance(caller, str) else None
    return why


def _require(key: str) -> Engine:
    """ENGINES[key] where it runs here; else need() skips, or fails in CI (which runs every
    engine)."""
    need(f"the engine {key}", _missing(key))
    return ENGINES[key]


@pytest.fixture(params=list(ENGINES))
def engine(request: pytest.FixtureRequest) -> Engine:
    return _require(request.param)


def test_every_registered_engine_is_in_the_harness():
    from launcher.runtime.engines import names

    assert sorted(names()) == sorted({e.name for e in ENGINES.values()}), \
        "add the new engine's line to ENGINES"


@pytest.fixture
def work(engine: Engine, tmp_path: Path):  # type: ignore[no-untyped-def]
    """The working folder of a run: one the rootless user may write where it runs launcher."""
    if not engine.rootless:
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(prefix="launcher-rootless-", dir="/tmp"))
    folder.chmod(0o777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _invocation(engine: Engine, work: Path) -> tuple[list[str], dict[str, str]]:
    """The command that starts `launcher` as `engine`'s caller, and its environment."""
    if engine.rootless:
        caller = _rootless()
        return caller.launcher(), caller.env(work)
    return [sys.executable, "-m", "launcher"], {**os.environ, "PYTHONPATH": str(ROOT)}


def _run(engine: Engine, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command, env = _invocation(engine, cwd)
    return subprocess.run([*command, "run", "--runtime", engine.name, *engine.args, *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _processes_with(token: str) -> list[str]:
    """The processes of this machine (containers' included) whose command line has `token`."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmdline = (d / "cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline:
            words = cmdline.replace(b"\0", b" ").decode(errors="replace")
            found.append(f"process {d.name}: {words[:120]}")
    return found


def _left(engine: Engine, name: str, token: str) -> list[str]:
    """Whatever of run NAME is still here: its processes, its containers or cgroups, and
    what the engine itself lists as a dead launcher's leftovers (what `doctor` shows)."""
    from launcher.runtime.engines import get_engine

    leftovers = [f"leftover {x.kind} {x.ident} ({x.detail})"
                 for x in get_engine(engine.name).leftovers()
                 if name in x.ident or name in x.detail] if not engine.rootless else []
    return _processes_with(token) + engine.held(name) + leftovers


# --- 1. the exit status is the workload's ------------------------------------------------


@pytest.mark.parametrize(("script", "status", "sentence"), [
    ("exit 7", 7, "launcher: the workload exited with its own status 7."),
    ("kill -9 $$", 128 + 9, "launcher: the workload was killed by SIGKILL, and no OOM kill was "
                            "counted"),
], ids=["exit-7", "sigkill"])
def test_the_exit_status_is_the_workloads(engine, work, script, status, sentence):
    proc = _run(engine, "--", "sh", "-c", script, cwd=work)
    assert proc.returncode == status, proc.stderr
    assert supervisor_sentence(proc.stderr).startswith(sentence), proc.stderr


# --- 2. a limit asked for is enforced, and named when it bites -----------------------------


def test_a_pids_limit_is_enforced_and_named(engine, work):
    prof = profile(work, "p50", "extends: base\nlimits: {pids: 50}\n")
    Path(prof).chmod(0o644)
    dry = _run(engine, "-p", prof, "--dry-run", "--json", "--", "true", cwd=work)
    assert dry.returncode == 0, dry.stderr
    if "pids" in json.loads(dry.stdout)["advisory"]:  # what launcher promises where it cannot
        refused = _run(engine, "-p", prof, "--require-limits", "--", "python3", "-c", BOMB,
                       cwd=work)
        assert refused.returncode == 1, refused.stderr
        assert "pids" in refused.stderr.splitlines()[-1], refused.stderr
        ran = _run(engine, "-p", prof, "--", "python3", "-c", PAST_50, cwd=work)
        assert ran.returncode == 0 and "advisory only: pids" in ran.stderr, ran.stderr
        assert ran.stdout == "ran 60 threads\n", ran.stderr  # as said: the limit was not kept
        return
    proc = _run(engine, "-p", prof, "--", "python3", "-c", BOMB, cwd=work)
    assert proc.returncode != 0
    first = proc.stderr.splitlines()[0]
    assert f"{engine.name} run, enforced by the kernel: " in first and "pids 50 (" in first, \
        proc.stderr
    assert supervisor_sentence(proc.stderr).startswith(
        "launcher: the pids limit was reached: pids.current hit 50/50 and the kernel refused"), \
        proc.stderr


# --- 3 and 4. Ctrl-C, and kill -9 of launcher: nothing outlives the run --------------------


def _start_waiting(engine: Engine, cwd: Path) -> tuple[subprocess.Popen[str], str, str]:
    """`launcher run` of WAITS, in the background, once the workload waits (its handler set):
    the process, the run's name and a token only the workload's command line carries."""
    name = f"lt-{engine.id}-{uuid.uuid4().hex[:8]}"
    ready = cwd / f"ready-{uuid.uuid4().hex}"
    command, env = _invocation(engine, cwd)
    proc = subprocess.Popen(
        [*command, "run", "--runtime", engine.name, *engine.args, "--name", name, "--",
         "python3", "-c", WAITS, str(ready)],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def waiting() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"launcher ended first: {proc.communicate()}")
        return ready.exists()

    try:
        wait_until(waiting, timeout=120, what="the workload to start")
    except BaseException:
        proc.kill()
        raise
    return proc, name, ready.name


def test_ctrl_c_reaches_the_workload_and_leaves_nothing(engine, work):
    proc, name, token = _start_waiting(engine, work)
    try:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert out == "handled SIGINT\n", err  # its own handler ran
    assert proc.returncode == -signal.SIGINT, err  # it died of SIGINT: launcher ends by it
    assert "launcher: the workload was killed by SIGINT." in err
    assert _left(engine, name, token) == []  # at once: launcher cleaned up before it ended


def test_kill_9_of_launcher_leaves_nothing(engine, work):
    proc, name, token = _start_waiting(engine, work)
    try:
        assert _processes_with(token)  # the check below sees the workload while it runs
        proc.kill()
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    left: list[str] = []

    def gone() -> bool:
        left[:] = _left(engine, name, token)
        return not left

    try:  # the supervisor stops the tree (SIGTERM, SIGKILL 3 s later): a few seconds
        wait_until(gone, timeout=20, interval=0.2, what="the run to be gone")
    except AssertionError:
        raise AssertionError(f"the run outlived `kill -9` of launcher: {left}") from None


# --- 5. pipes ------------------------------------------------------------------------------

PAYLOAD = "bytes(range(256)) * 2048 + b'\\r\\nno newline at the end'"  # 512 KiB and a bit
ECHOES = ("import sys\n"
          "got = sys.stdin.buffer.read()\n"
          f"sys.stdout.buffer.write({PAYLOAD})\n"
          "print('to stderr; stdin had', len(got), 'bytes', file=sys.stderr)\n")


def test_stdout_comes_back_unchanged_and_stderr_apart(engine, work):
    """docs/running.md: natively the workload's stdin is launcher's, as for any command; a
    container's is /dev/null without -i (its stdin is the supervisor's lifeline), as with
    `docker run`; its stdout comes back byte for byte (no TTY, no added line), its stderr on
    stderr alone."""
    command, env = _invocation(engine, work)
    proc = subprocess.run(
        [*command, "run", "--runtime", engine.name, *engine.args, "--", "python3", "-c",
         ECHOES], cwd=work, env=env, input=b"hi\n" * 1000, capture_output=True, timeout=300)
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    assert proc.stdout == eval(PAYLOAD)  # noqa: S307 - our own constant
    had = 3000 if engine.name == "native" else 0  # b"hi\n" * 1000
    assert f"to stderr; stdin had {had} bytes\n" in err
    assert "launcher: the workload exited with status 0." in err


def test_a_reader_that_goes_away_ends_the_workload(engine, work):
    """`launcher run -- yes | head -1` ends as the pipeline does on every engine: the engine
    tells the supervisor that the reader went away, and the workload meets SIGPIPE."""
    command, env = _invocation(engine, work)
    line = " ".join([*command, "run", "--runtime", engine.name, *engine.args, "--", "yes"])
    piped = subprocess.run(f"{line} | head -1", shell=True, cwd=work, env=env,
                           capture_output=True, text=True, timeout=120)
    assert piped.stdout == "y\n" and "killed by SIGPIPE" in piped.stderr, piped.stderr


# --- 6. files written into the working folder are the caller's ----------------------------

NOBODY = (4321, 4321)  # a caller with no name here: no passwd line makes it right by chance


def _as_unprivileged(engine: Engine, work: Path) -> tuple[list[str], dict[str, str],
                                                          tuple[int, int]]:
    """The command and environment that run launcher as an unprivileged caller, and its IDs:
    for Podman the rootless user (a user without subordinate IDs has no rootless Podman), else
    uid 4321 with Docker's group (the one a user needs for Docker); or skip."""
    need("root and setpriv (util-linux), to become another user",
         None if os.getuid() == 0 and shutil.which("setpriv") else
         f"uid {os.getuid()}, setpriv at {shutil.which('setpriv')}")
    if engine.rootless:
        pytest.skip(f"{engine.id}: its caller is unprivileged already (the self case)")
    if engine.name == "podman":
        _require("podman-rootless")
        return (*_invocation(ENGINES["podman-rootless"], work),
                (_rootless().uid, _rootless().gid))
    found = python_for(*NOBODY)
    if found is None:
        need(f"a Python {sys.version_info[0]}.{sys.version_info[1]} that uid {NOBODY[0]} may "
             f"run launcher with", "none found (tests/rootless.py: python_for)")
    python, paths = found
    try:
        groups = f"--groups={grp.getgrnam('docker').gr_gid}"
    except KeyError:
        groups = "--clear-groups"
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": paths, "HOME": str(work),
           "XDG_CONFIG_HOME": str(FIXTURES / "no-user-config"),
           "LAUNCHER_RUNS_DIR": str(work / ".runs"), "LAUNCHER_PROFILE_PATH": ""}
    return (["setpriv", f"--reuid={NOBODY[0]}", f"--regid={NOBODY[1]}", groups, python, "-m",
             "launcher"], env, NOBODY)


@pytest.mark.parametrize("caller", ["self", "unprivileged"])
def test_files_the_workload_writes_are_the_callers(engine, caller):
    """docs/commands.md: the workload runs as you, so what it writes into mounted folders (the
    current one is) is yours. As root the image's default user would pass too: a caller of
    uid 4321 is the one a container left as root fails."""
    work = Path(tempfile.mkdtemp(prefix="launcher-owner-", dir="/tmp"))
    try:
        work.chmod(0o777)
        if caller == "self":
            command, env = _invocation(engine, work)
            ids = (_rootless().uid, _rootless().gid) if engine.rootless else (
                os.getuid(), os.getgid())
        else:
            command, env, ids = _as_unprivileged(engine, work)
        proc = subprocess.run(
            [*command, "run", "--runtime", engine.name, *engine.args, "--",
             "sh", "-c", "id -u; id -g; echo x > written && mkdir made && echo y > made/inner"],
            cwd=work, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == [str(ids[0]), str(ids[1])], proc.stderr
        owners = {p: (lambda s: (s.st_uid, s.st_gid))((work / p).stat())
                  for p in ("written", "made", "made/inner")}
        assert owners == dict.fromkeys(owners, ids)
    finally:
        shutil.rmtree(work, ignore_errors=True)
