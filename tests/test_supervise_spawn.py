"""launcher/supervise/spawn.py: the workload's start as a shell gives it (a process group of
its own, the default signal dispositions, the mask it is given, its file actions), on a
terminal of its own (a session whose controlling terminal it is), and by fork and exec where
posix_spawnp is missing (Python 3.7) or refused."""

from __future__ import annotations

import json
import os
import pty
import signal
import sys

import pytest

from launcher.supervise.spawn import DUP2, OPEN, NotRunnable, fork_exec, spare_from_oom, spawn
from tests.supervised import read_all, wait_status

PY = sys.executable
FACTS = ("import json, os, signal, sys; sys.stdout.write(json.dumps({"
         "'group': os.getpgrp(), 'pid': os.getpid(), 'session': os.getsid(0), "
         "'int': signal.getsignal(signal.SIGINT) is signal.default_int_handler, "
         "'ttou': int(signal.getsignal(signal.SIGTTOU)), "
         "'blocked': sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])), "
         "'stdin': sys.stdin.read()}))")


def _facts(start, *args, **kw):  # type: ignore[no-untyped-def]
    """The child's facts (FACTS), started by `start` with its stdout on a pipe."""
    r, w = os.pipe()
    # ignored here, as a background job has SIGINT and launcher's supervisor SIGTTOU
    old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTTOU)}
    try:
        pid = start([PY, "-c", FACTS], dict(os.environ), *args, w, **kw)
    finally:
        for sig, was in old.items():
            signal.signal(sig, was)
    os.close(w)
    status = wait_status(pid)
    return pid, status, json.loads(read_all(r) or b"null")


def _spawn(cmd, env, w, **kw):  # type: ignore[no-untyped-def]
    return spawn(cmd, env, [(DUP2, w, 1)], {signal.SIGUSR1}, lambda _: None, **kw)


def _fork_exec(cmd, env, stdin, w, **kw):  # type: ignore[no-untyped-def]
    return fork_exec(cmd, env, {signal.SIGUSR2},
                     [(OPEN, 0, stdin, os.O_RDONLY, 0), (DUP2, w, 1)], **kw)


def test_spawn_a_group_of_its_own_with_the_shells_signals_and_the_given_mask():
    pid, status, got = _facts(_spawn)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert got["group"] == got["pid"] == pid and got["session"] == os.getsid(0)
    assert got["int"] is True and got["ttou"] == int(signal.SIG_DFL)
    assert got["blocked"] == [int(signal.SIGUSR1)]


def test_fork_and_exec_does_what_posix_spawn_does(tmp_path):
    (tmp_path / "in").write_text("from a file")
    pid, status, got = _facts(_fork_exec, str(tmp_path / "in"))
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert got["group"] == got["pid"] == pid and got["session"] == os.getsid(0)
    assert got["int"] is True and got["ttou"] == int(signal.SIG_DFL)
    assert got["blocked"] == [int(signal.SIGUSR2)]
    assert got["stdin"] == "from a file"  # the OPEN action, on fd 0
    pid, status, got = _facts(_fork_exec, str(tmp_path / "in"), new_session=True)
    assert got["session"] == got["group"] == got["pid"] == pid


def test_fork_and_exec_of_a_command_that_is_not_there_exits_127():
    pid = fork_exec(["no-such-command-here"], dict(os.environ), set(), [])
    status = wait_status(pid)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 127


def test_without_posix_spawnp_the_workload_starts_by_fork(monkeypatch, tmp_path):
    """Python 3.7's os: the same group, signals and mask."""
    monkeypatch.delattr(os, "posix_spawnp")
    pid, status, got = _facts(_spawn)
    assert os.WEXITSTATUS(status) == 0
    assert got["group"] == got["pid"] == pid and got["int"] is True
    assert got["session"] == os.getsid(0)  # the terminal's session still: not a new one
    assert got["blocked"] == [int(signal.SIGUSR1)]


def test_without_posix_spawnp_a_refused_fork_is_not_runnable(monkeypatch):
    def refused() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.delattr(os, "posix_spawnp")
    monkeypatch.setattr(os, "fork", refused)
    with pytest.raises(NotRunnable) as got:
        spawn([PY, "-c", "pass"], dict(os.environ), [], set(), lambda _: None)
    assert got.value.status == 127
    assert got.value.words.startswith(f"cannot run {PY!r}: ")


@pytest.mark.parametrize("how", ["posix_spawn", "fork"])
def test_a_workload_on_a_terminal_of_its_own_leads_its_session(how, monkeypatch):
    if how == "fork":  # Python 3.7's os, a container with -t
        monkeypatch.delattr(os, "posix_spawnp")
    master, slave = pty.openpty()
    console = os.ttyname(slave)
    code = ("import os, sys; print(os.getsid(0) == os.getpid() == os.getpgrp(), "
            "os.tcgetpgrp(0) == os.getpid(), os.ttyname(0) == os.ttyname(1) == os.ttyname(2)"
            f" == {console!r}); sys.stdout.flush()")
    pid = spawn([PY, "-c", code], dict(os.environ), [(DUP2, 2, 1)], set(), lambda _: None,
                console=console)
    os.close(slave)
    out = b""
    while True:
        try:
            data = os.read(master, 1024)
        except OSError:  # EIO: the terminal's last holder is gone
            break
        if not data:
            break
        out += data
    os.close(master)
    assert os.WEXITSTATUS(wait_status(pid)) == 0
    assert out.split() == [b"True", b"True", b"True"], out


# A seccomp filter that answers clone3 with EPERM, as an old Docker or containerd profile does
# (glibc >= 2.34 starts posix_spawn's child by clone3): installed in a child of the test, which
# then starts the workload as the supervisor does.
NO_CLONE3 = """
import ctypes, json, os, platform, signal, sys
from launcher.supervise.spawn import DUP2, spawn
arch = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}[platform.machine()]
insns = [(0x20, 0, 0, 4), (0x15, 0, 3, arch), (0x20, 0, 0, 0), (0x15, 0, 1, 435),
         (0x06, 0, 0, 0x00050000 | 1), (0x06, 0, 0, 0x7FFF0000)]

class Insn(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint)]

class Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Insn))]

filt = (Insn * len(insns))(*[Insn(*i) for i in insns])
prog = Prog(len(insns), filt)
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(38, 1, 0, 0, 0) or libc.prctl(22, 2, ctypes.byref(prog), 0, 0):
    print(json.dumps({"filtered": False})); sys.exit(0)
r, w = os.pipe()
said = []
pid = spawn([sys.executable, "-c", sys.argv[1]], dict(os.environ), [(DUP2, w, 1)],
            {signal.SIGUSR1}, said.append)
os.close(w)
_, status = os.waitpid(pid, 0)
out = b""
while data := os.read(r, 65536):
    out += data
print(json.dumps({"filtered": True, "said": said, "status": status, "facts": json.loads(out)}))
"""


def test_where_a_seccomp_filter_refuses_clone3_the_workload_starts_by_fork():
    import platform
    import subprocess

    from tests.conftest import ROOT

    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("a clone3 filter for x86_64 and aarch64 only")
    proc = subprocess.run([PY, "-c", NO_CLONE3, FACTS], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    if not got["filtered"]:
        pytest.skip("no seccomp filter may be installed here")
    assert got["said"] == ["warning: a seccomp filter refuses clone3 here; the workload's "
                           "threads will fail to start (glibc creates them with clone3)"]
    assert os.WIFEXITED(got["status"]) and os.WEXITSTATUS(got["status"]) == 0
    facts = got["facts"]
    assert facts["group"] == facts["pid"] and facts["int"] is True
    assert facts["session"] == os.getsid(0)  # no terminal of its own: not a new session
    assert facts["blocked"] == [int(signal.SIGUSR1)]  # its mask, and its stdout the pipe


def test_spared_from_the_oom_killer_writes_minus_1000_or_says_it_could_not(tmp_path):
    """spare_from_oom under a proc root of the test's: -1000 written whole, True; False where
    the file cannot be written (the kernel refuses a process without CAP_SYS_RESOURCE)."""
    (tmp_path / "self").mkdir()
    adj = tmp_path / "self/oom_score_adj"
    adj.write_text("0")
    assert spare_from_oom(str(tmp_path)) is True
    assert adj.read_text() == "-1000"
    assert spare_from_oom(str(tmp_path / "none")) is False
