"""`launcher run -- CMD` behaves as CMD does (issue 44, docs/running.md): each shell habit run
with and without launcher in front, comparing what the user sees. The terminal's habits run in
an interactive bash on a real pseudo-terminal, typed into as a person types (Ctrl-C is the byte
0x03 the terminal turns into SIGINT for its foreground process group)."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, need
from tests.docker_helpers import BASE, docker_missing

BIN = str(Path(sys.executable).parent)  # the venv's `launcher`
WITH = "launcher run --runtime native --"
BOTH = pytest.mark.parametrize("pre", ["", WITH], ids=["bare", "launcher"])
IMAGE = f"launcher run --runtime docker --image {BASE}"


def env(**more: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{BIN}:{os.environ['PATH']}",
            "LAUNCHER_QUIET": "1", **more}


@pytest.fixture(autouse=True)
def signals_as_a_terminal_gives_them():
    """The stop signals at their defaults while a test starts its shells and runs, as a
    terminal's shell leaves them. A background job (`pytest ... &` in a script, the mutation
    harness's workers) starts with SIGINT and SIGQUIT ignored, `nohup` with SIGHUP ignored:
    an ignored signal is inherited on purpose (launcher's workload keeps it too), and a shell
    cannot trap one it started with ignored, so the bare shell's Ctrl-C would do nothing."""
    sigs = {signal.SIGINT: signal.default_int_handler, signal.SIGQUIT: signal.SIG_DFL,
            signal.SIGHUP: signal.SIG_DFL}
    was = {s: signal.signal(s, h) for s, h in sigs.items()}
    yield
    for s, h in was.items():
        signal.signal(s, h)


@pytest.fixture
def docker() -> None:
    need("Docker and the base image", docker_missing())


class Shell:
    """An interactive bash on a pseudo-terminal of its own (job control on)."""

    def __init__(self, cwd: Path) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # pragma: no cover - the child
            os.chdir(cwd)
            os.execvpe("bash", ["bash", "--norc", "--noprofile", "-i"],
                       env(PS1="PROMPT$ ", TERM="dumb"))
        self.out = b""
        self.expect("PROMPT$ ", 20)

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def expect(self, words: str, timeout: float = 60) -> str:
        """Read until `words` appear after what was read before; all read so far."""
        start, end = len(self.out), time.monotonic() + timeout
        while words.encode() not in self.out[start:]:
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {words!r} within {timeout} s; the screen:\n"
                                     f"{self.out.decode(errors='replace')[-3000:]}")
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.5))
            if ready:
                try:
                    self.out += os.read(self.fd, 65536)
                except OSError:
                    break
        return self.out.decode(errors="replace")

    def read_for(self, seconds: float) -> str:
        """All read so far, after reading whatever comes for `seconds`."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                self.out += os.read(self.fd, 65536)
        return self.out.decode(errors="replace")

    def run(self, line: str, until: str = "DONE", timeout: float = 60) -> str:
        """A command line; what the screen shows after it, once `until` is there."""
        mark = len(self.out)
        self.type(line + "\r")
        self.expect(until, timeout)
        return self.out[mark:].decode(errors="replace")

    def close(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        os.close(self.fd)


@pytest.fixture
def shell(tmp_path):
    (tmp_path / "train.sh").write_text(
        "python3 -c 'import time; print(\"read\" + \"y\", flush=True); time.sleep(60)'\n"
        "echo 'training done'\n")
    s = Shell(tmp_path)
    yield s
    s.close()


def after_prompt(screen: str) -> str:
    """The screen after the command line that was typed (its echo contains the words)."""
    return screen.split("\n", 1)[1] if "\n" in screen else ""


@BOTH
def test_ctrl_c_stops_a_script_and_the_loop_around_it(shell, pre):
    shell.type(f"for i in 1 2; do {pre} bash train.sh; echo \"next $i\"; done; "
               "echo D''ONE\r")
    shell.expect("ready")
    time.sleep(0.3)
    shell.type("\x03")
    screen = after_prompt(shell.expect("PROMPT$ "))
    assert "training done" not in screen  # the script's next step never ran
    assert "next" not in screen  # nor the loop's: the shell saw a death by SIGINT
    assert "DONE" not in screen


@BOTH
def test_ctrl_backslash_quits_the_workload_once(shell, pre):
    screen = shell.run(f"{pre} python3 -c 'import time; print(\"read\"+\"y\", flush=True); "
                       "time.sleep(60)'; echo \"status=$?\"; echo D''ONE", until="ready")
    time.sleep(0.3)
    shell.type("\x1c")
    screen = shell.expect("DONE")
    assert "status=131" in screen  # died of SIGQUIT: 128 + 3, as bash reports it


@BOTH
def test_a_password_prompt_on_dev_tty_reads_and_echoes_nothing(shell, pre):
    shell.type(f"{pre} python3 -c 'import getpass; "
               "ok = getpass.getpass(\"PW\"+\">\") == \"s3\"+\"cret\"; print(\"got \" + str(ok))'"
               "; echo D''ONE\r")
    shell.expect("PW>", 60)
    shell.type("s3cret\r")
    screen = shell.expect("DONE")
    assert "got True" in screen
    assert "s3cret" not in screen  # typed with the echo off: never shown


@BOTH
def test_stty_tostop_stops_nothing(shell, pre):
    screen = shell.run(f"stty tostop; {pre} echo hello; echo \"status=$?\"; stty -tostop; "
                       "echo D''ONE")
    assert "hello" in after_prompt(screen)
    assert "status=0" in screen
    assert "Stopped" not in screen


@BOTH
def test_ctrl_z_stops_the_run_and_fg_resumes_it(shell, pre):
    shell.type(f"{pre} python3 -c 'import time\nfor i in range(10): print(\"tick\", i, "
               "flush=True); time.sleep(0.4)'; echo D''ONE\r")
    shell.expect("tick 2")
    shell.type("\x1a")
    at = shell.expect("Stopped").count("tick ")
    assert shell.read_for(1.5).count("tick ") <= at + 1  # it stopped printing
    shell.type("fg\r")
    screen = shell.expect("tick 9")
    assert "tick 9" in screen


@BOTH
def test_a_repl_at_a_terminal(shell, pre):
    shell.type(f"{pre} python3 -q\r")
    shell.expect(">>> ")
    shell.type("print(6 * 7)\r")
    shell.expect("42")
    shell.type("exit()\r")
    shell.type("echo D''ONE\r")
    shell.expect("DONE")


# --- pipes and descriptors, without a terminal -------------------------------------------


def sh(script: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env(), capture_output=True,
                          text=True, timeout=timeout)


@BOTH
def test_stdin_is_the_workloads(tmp_path, pre):
    p = sh(f"printf 'a\\nb\\n' | {pre} python3 -c 'import sys; print(repr(sys.stdin.read()))'",
           tmp_path)
    assert p.stdout == "'a\\nb\\n'\n", p.stderr


def test_a_shared_pipe_keeps_its_flags(tmp_path):
    """O_NONBLOCK belongs to the pipe's file description (FIELD.md 46): the other writer of a
    pipe launcher shares must find it as it was, while launcher runs."""
    check = ("import fcntl, os, sys; "
             "print('nonblocking', bool(fcntl.fcntl(1, fcntl.F_GETFL) & os.O_NONBLOCK))")
    p = sh(f"{{ {WITH} python3 -c 'import pathlib, time; print(1, flush=True); "
           f"pathlib.Path(\"started\").touch(); time.sleep(3)' & "
           f"while [ ! -e started ]; do sleep 0.05; done; python3 -c \"{check}\"; wait; }} "
           f"| cat", tmp_path)
    assert "nonblocking False" in p.stdout, p.stdout + p.stderr


def test_a_reader_that_pauses_gets_every_byte(tmp_path):
    """A reader that starts reading 35 s after the workload ended (`| less`): all of it."""
    write = "import sys; sys.stdout.buffer.write(b'x' * 1572876)"
    p = sh(f"{WITH} python3 -c \"{write}\" | (sleep 35; wc -c)", tmp_path, timeout=180)
    assert p.stdout.strip() == "1572876", p.stderr


@BOTH
def test_a_full_disk_is_the_workloads_write_error(tmp_path, pre):
    p = sh(f"{pre} python3 -c 'import sys\ntry:\n print(\"hi\", flush=True)\nexcept OSError as e:"
           f"\n print(\"errno\", e.errno, file=sys.stderr)' > /dev/full; echo \"status=$?\"",
           tmp_path)
    assert "errno 28" in p.stderr  # ENOSPC reached the workload's write
    assert "status=0" in p.stdout


@BOTH
def test_descriptors_the_shell_opened_reach_the_workload(tmp_path, pre):
    p = sh(f"{pre} sh -c 'echo five >&5' 5>five.txt; {pre} cat <(echo from-a-process)",
           tmp_path)
    assert (tmp_path / "five.txt").read_text() == "five\n", p.stderr
    assert "from-a-process" in p.stdout


@BOTH
def test_not_executable_and_not_found_as_the_shell_says(tmp_path, pre):
    (tmp_path / "plain").write_text("echo hi\n")
    (tmp_path / "noint").write_text("#!/usr/bin/no-such-interpreter\necho hi\n")
    (tmp_path / "noint").chmod(0o755)
    p = sh(f"{pre} ./plain; echo \"status=$?\"; {pre} ./noint; echo \"status=$?\"", tmp_path)
    assert "status=126" in p.stdout and "Permission denied" in p.stderr
    assert "status=127" in p.stdout
    if pre:
        assert "/usr/bin/no-such-interpreter" in p.stderr  # the missing interpreter named


def test_the_closing_sentence_starts_on_its_own_line(tmp_path):
    p = subprocess.run(["bash", "-c", f"{WITH} printf 'no newline' 2>&1 | cat"], cwd=tmp_path,
                       env=env(LAUNCHER_QUIET=""), capture_output=True, text=True,
                       timeout=120)
    assert "no newline\nlauncher: " in p.stdout, p.stdout


# --- containers: -i, -t, and one stream where launcher's stdout and stderr are one ---------


@pytest.mark.parametrize("interactive", [True, False], ids=["-i", "no -i"])
def test_a_containers_stdin_with_and_without_i(tmp_path, docker, interactive):
    flag = "-i " if interactive else ""
    read = "python3 -c 'import sys; print(repr(sys.stdin.read()))'"
    ours = sh(f"printf 'a\\nb\\n' | {IMAGE} {flag}-- {read}", tmp_path)
    theirs = sh(f"printf 'a\\nb\\n' | docker run --rm {flag}{BASE} {read}", tmp_path)
    assert ours.stdout == theirs.stdout == ("'a\\nb\\n'\n" if interactive else "''\n"), \
        ours.stderr


INTERLEAVED = ("import sys\nfor i in range(1, 401):\n print('batch', i, flush=True)\n"
               " if i % 100 == 0: print('warning at', i, file=sys.stderr, flush=True)\n")


def test_two_to_one_keeps_the_order_in_a_container(tmp_path, docker):
    (tmp_path / "w.py").write_text(INTERLEAVED)
    p = sh(f"{IMAGE} -- python3 w.py 2>&1 | cat", tmp_path)
    lines = [x for x in p.stdout.splitlines() if not x.startswith("launcher:")]
    for n in (100, 200, 300, 400):
        assert lines.index(f"warning at {n}") == lines.index(f"batch {n}") + 1, p.stdout


def test_a_repl_and_one_ctrl_c_with_it(shell, docker):
    shell.type(f"{IMAGE} -it -- python3 -q\r")
    shell.expect(">>> ", 120)
    shell.type("import signal; n = []; signal.signal(signal.SIGINT, lambda *a: n.append(1))\r")
    shell.expect(">>> ")
    shell.type("import time; time.sleep(3)\r")
    time.sleep(1)
    shell.type("\x03")
    shell.expect(">>> ", 30)
    shell.type("print('sigints', len(n))\r")
    shell.expect("sigints 1")  # one Ctrl-C is one SIGINT
    shell.type("exit()\r")
    shell.expect("PROMPT$ ", 60)


def test_bash_has_job_control_with_it(shell, docker):
    shell.type(f"{IMAGE} -it -- bash --norc -i\r")
    shell.expect("# ", 120)  # the container's bash prompt (root)
    shell.type("sleep 30 & jobs; echo J''OBS-DONE\r")
    screen = shell.expect("JOBS-DONE")
    assert "no job control" not in screen
    assert "Running" in screen
    shell.type("kill %1; exit\r")
    shell.expect("PROMPT$ ", 60)


def test_kill_9_of_launcher_with_i_leaves_no_container(tmp_path, docker):
    name = f"tr-{os.getpid()}-{time.monotonic_ns() % 100000}"
    p = subprocess.Popen(["bash", "-c", f"sleep 600 | {IMAGE} -i --name {name} -- sleep 600"],
                         cwd=tmp_path, env=env(), start_new_session=True)

    def listed() -> str:
        return subprocess.run(["docker", "ps", "-aq", "--filter", f"name={name}"],
                              capture_output=True, text=True).stdout.strip()

    from tests.polling import wait_until

    def running() -> str:  # (listed as created is not started yet: see docs/running.md)
        return subprocess.run(["docker", "ps", "-q", "--filter", f"name={name}", "--filter",
                               "status=running"], capture_output=True, text=True).stdout.strip()

    wait_until(lambda: bool(running()), timeout=120, what="the container to start")
    launcher_pids = subprocess.run(["pgrep", "-f", "--", f"--name {name}"], capture_output=True,
                                   text=True).stdout.split()
    for pid in launcher_pids:
        os.kill(int(pid), signal.SIGKILL)
    try:
        wait_until(lambda: not listed(), timeout=60, what="the container to be gone")
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


@pytest.mark.parametrize("where", ["native", "docker"])
@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGQUIT], ids=["HUP", "QUIT"])
def test_a_hangup_or_quit_sent_to_launcher_ends_the_run_with_its_record(tmp_path, where, sig,
                                                                        request):
    """The terminal hangs up (the shell sends SIGHUP to its jobs), or SIGQUIT: relayed to the
    workload, which dies of it; launcher writes the record and its last lines, then ends by
    the same signal."""
    if where == "docker":
        request.getfixturevalue("docker")
    runs = tmp_path / "runs"
    ready = tmp_path / "ready"
    image = ["--image", BASE] if where == "docker" else []
    proc = subprocess.Popen(
        [sys.executable, "-m", "launcher", "run", "--runtime", where, *image, "--name", "hup",
         "--", "python3", "-c",
         f"import pathlib, time; pathlib.Path({str(ready)!r}).touch(); time.sleep(60)"],
        cwd=tmp_path, env=env(LAUNCHER_RUNS_DIR=str(runs), LAUNCHER_QUIET=""),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    from tests.polling import wait_until

    wait_until(ready.exists, timeout=120, what="the workload to start")
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -sig, err
    assert f"killed by {signal.Signals(sig).name}" in err
    summary = json.loads((runs / "hup" / "summary.json").read_text())
    assert summary["exit_status"] == 128 + sig and summary["runtime"] == where
