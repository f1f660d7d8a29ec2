"""Every cause of a failed thread creation, named (issue 21): each reproduced by a real process
against a real limit, under the real supervisor (`python -m launcher.supervise`), as a
non-root user where the kernel exempts root; and the sentences' boundaries on made-up
evidence. threads-max is global to the machine: the cgroup v2 lab sets it in its own kernel
(tests/lab/extras.py)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from launcher.supervise import causes
from launcher.supervise.diagnose import KernelCounters, explain
from tests.as_user import interpreter_for, reachable
from tests.conftest import ROOT
from tests.docker_helpers import start_of, watch_of
from tests.host_trees import host
from tests.polling import wait_until, while_running

BOMB = ROOT / "tests/fixtures/thread_bomb.py"
SECCOMP = ROOT / "tests/fixtures/seccomp_clone3.py"
NOBODY = 65534
root_only = pytest.mark.usefixtures("root")  # conftest.root: setpriv, namespaces


def supervise(tmp_path: Path, *workload: str, prefix: tuple[str, ...] = (), uid: int = 0,
              timeout: float = 60) -> tuple[int, str, str]:
    """(exit status, diagnosis, stdout) of the supervisor running `workload`."""
    py = interpreter_for(uid)
    if uid:  # pytest's folders are root's own: one the user may write
        if not reachable(ROOT / "launcher/__init__.py"):
            pytest.skip(f"UID {uid} cannot read {ROOT} (a private copy)")
        tmp_path = Path(tempfile.mkdtemp(prefix="launcher-causes-", dir="/tmp"))
        tmp_path.chmod(0o777)
    exit_file = tmp_path / "exit.json"
    env = {**os.environ, "LAUNCHER_RESOLVED": "1", "LAUNCHER_EXIT_FILE": str(exit_file),
           "PYTHONPATH": str(ROOT)}
    user = (("setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups") if uid else ())
    cmd = [*user, *prefix, py, "-m", "launcher.supervise", "--", py, *workload]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=tmp_path)
    record = json.loads(exit_file.read_text())
    if uid:
        shutil.rmtree(tmp_path)
    return proc.returncode, record["diagnosis"], proc.stdout


def _threads(stdout: str) -> int:
    return int(stdout.split("bomb: ")[1].split()[0])


@root_only
def test_rlimit_nproc_of_a_non_root_user_is_named(tmp_path):
    rc, said, out = supervise(tmp_path, str(BOMB), uid=NOBODY,
                              prefix=("prlimit", "--nproc=60:60"))
    assert rc == 1 and _threads(out) < 60, out
    assert "RLIMIT_NPROC 60 was reached" in said and f"UID {NOBODY}" in said, said
    assert "raise limits.nproc" in said


@root_only
def test_root_is_exempt_from_rlimit_nproc(tmp_path):
    rc, said, out = supervise(tmp_path, str(BOMB), "100", prefix=("prlimit", "--nproc=60:60"))
    assert rc == 0 and _threads(out) == 100, (out, said)
    assert said == "the workload exited with status 0."


def test_rlimit_as_is_named_and_a_smaller_stack_fits_more(tmp_path):
    # one malloc arena: each of glibc's others reserves 64 MiB, which no stack size changes
    limit = ("env", "MALLOC_ARENA_MAX=1", "prlimit", "--as=700000000")
    rc, said, out = supervise(tmp_path, str(BOMB), prefix=limit)
    assert rc == 1, out
    assert "RLIMIT_AS 668MiB was reached: VmSize reached" in said, said
    assert "8MiB stack" in said and "limits.stack" in said
    # the fix it names works: 1 MiB stacks leave room for more threads
    _, said_small, out_small = supervise(tmp_path, str(BOMB),
                                         prefix=(*limit, "--stack=1048576"))
    assert _threads(out_small) > 2 * _threads(out), (out, out_small)
    assert "1MiB stack" in said_small


def test_rlimit_data_is_named(tmp_path):
    rc, said, out = supervise(tmp_path, str(BOMB), prefix=("prlimit", "--data=300000000"))
    assert rc == 1, out
    assert "RLIMIT_DATA 286MiB was reached: VmData reached" in said, said
    assert "RLIMIT_AS" not in said


def _pid_max_per_namespace() -> bool:
    """Linux >= 6.14 gives each PID namespace its own kernel.pid_max."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c",
                            "echo 500 > /proc/sys/kernel/pid_max && cat "
                            "/proc/sys/kernel/pid_max"], capture_output=True, text=True)
    return probe.stdout.strip() == "500" and Path("/proc/sys/kernel/pid_max").read_text() != "500\n"


@pytest.fixture
def pid_max_per_namespace(root: None) -> None:
    """Root (conftest's `root`: failed in CI) and a kernel with a pid_max per PID namespace,
    which is the host's (a plain skip where it is older)."""
    if not _pid_max_per_namespace():
        pytest.skip("needs a kernel with a pid_max per PID namespace (6.14+)")


def test_pid_max_of_the_namespace_is_named(pid_max_per_namespace, tmp_path):
    host = Path("/proc/sys/kernel/pid_max").read_text()
    py = sys.executable
    script = (f"echo 400 > /proc/sys/kernel/pid_max && LAUNCHER_RESOLVED=1 "
              f"LAUNCHER_EXIT_FILE={tmp_path}/exit.json PYTHONPATH={ROOT} {py} -m "
              f"launcher.supervise -- {py} {BOMB}")
    proc = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", script],
                          capture_output=True, text=True, timeout=60)
    said = json.loads((tmp_path / "exit.json").read_text())["diagnosis"]
    assert proc.returncode == 1 and 300 < _threads(proc.stdout) < 400, proc.stdout
    assert "kernel.pid_max 400 was reached" in said, said
    assert Path("/proc/sys/kernel/pid_max").read_text() == host


def test_seccomp_refusing_clone3_is_named(tmp_path):
    assert not causes.clone3_refused()  # no filter here: the probe says so
    rc, said, out = supervise(tmp_path, str(BOMB), prefix=(sys.executable, str(SECCOMP)))
    assert rc == 1 and _threads(out) == 0, out
    assert "a seccomp filter refuses clone3" in said, said


def test_sigkill_from_outside_is_not_blamed_on_memory(tmp_path):
    exit_file = tmp_path / "exit.json"
    env = {**os.environ, "LAUNCHER_RESOLVED": "1", "LAUNCHER_EXIT_FILE": str(exit_file)}
    sup = subprocess.Popen([sys.executable, "-m", "launcher.supervise", "--", "sleep", "60"],
                           env=env, cwd=ROOT)
    try:
        children = Path(f"/proc/{sup.pid}/task/{sup.pid}/children")
        wait_until(while_running(sup, lambda: children.read_text().split()), 20,
                   interval=0.02, what="the supervisor's child")
        os.kill(int(children.read_text().split()[0]), signal.SIGKILL)
        assert sup.wait(timeout=20) == 137
    finally:
        sup.kill()
    said = json.loads(exit_file.read_text())["diagnosis"]
    assert said.startswith("the workload was killed by SIGKILL, and no OOM kill was counted"), said


# -- the sentences' boundaries, on made-up evidence ----------------------------------------


@pytest.fixture(autouse=False)
def no_seccomp(monkeypatch):
    monkeypatch.setattr(causes, "clone3_refused", lambda: False)


def test_nproc_is_named_at_its_soft_limit_only(no_seccomp):
    at = causes.thread_limit(start_of(nproc=60, outside=10), watch_of(threads=48), None)
    assert at is not None and at.startswith("RLIMIT_NPROC 60 was reached: UID 1000 ran ~58")
    assert causes.thread_limit(start_of(nproc=60, outside=10), watch_of(threads=47), None) is None
    # the kernel's peak counts where the samples missed it
    assert causes.thread_limit(start_of(nproc=60, outside=10), watch_of(threads=3), 50)
    assert causes.thread_limit(start_of(nproc=60, exempt=True), watch_of(threads=60), None) is None


def test_address_space_is_named_within_two_stacks_of_the_limit(no_seccomp):
    per = (8 << 20) + 4096
    limit = 1000 << 20
    near = watch_of(threads=10, vm_size=limit - 2 * per)
    said = causes.thread_limit(start_of(address_space=limit), near, None)
    assert said is not None and said.startswith("RLIMIT_AS 1000MiB was reached")
    far = watch_of(threads=10, vm_size=limit - 2 * per - 1)
    assert causes.thread_limit(start_of(address_space=limit), far, None) is None
    # many threads of reserved stacks name it even with no sample of VmSize near
    half = (limit // 2) // per + 1
    assert causes.thread_limit(start_of(address_space=limit), watch_of(threads=half), None)
    assert causes.thread_limit(start_of(address_space=limit), watch_of(threads=half - 1),
                               None) is None
    data = causes.thread_limit(start_of(data=limit), watch_of(threads=10, vm_data=limit), None)
    assert data is not None and data.startswith("RLIMIT_DATA 1000MiB was reached: VmData")


def test_threads_max_and_pid_max_boundaries(no_seccomp):
    said = causes.thread_limit(start_of(threads_max=500), watch_of(threads=5, host_tasks=498), None)
    assert said is not None and said.startswith("kernel.threads-max 500 was reached: the "
                                                "kernel ran ~498")
    assert causes.thread_limit(start_of(threads_max=500), watch_of(host_tasks=497), None) is None
    # before the run and the run's own peak, where the samples missed the host's
    assert causes.thread_limit(start_of(threads_max=500, tasks_before=450), watch_of(threads=48),
                               None)
    said = causes.thread_limit(start_of(pid_max=1000), watch_of(host_tasks=700, last_pid=999), None)
    assert said is not None and said.startswith("kernel.pid_max 1000 was reached: ~700 tasks")
    assert causes.thread_limit(start_of(pid_max=1000), watch_of(host_tasks=699), None) is None


def test_explain_orders_the_causes():
    before, after = KernelCounters(), KernelCounters()
    start, watch = start_of(nproc=60), watch_of(threads=60)
    # a clean exit names no limit, whatever the evidence
    assert explain(0, before, after, start, watch) == "the workload exited with status 0."
    assert "RLIMIT_NPROC" in explain(1, before, after, start, watch)
    # an OOM kill of this run comes first; an earlier one does not count
    before.oom_kills, after.oom_kills = 2, 3
    assert explain(-9, before, after, start, watch).startswith("the memory limit killed")
    before.oom_kills = 3
    assert explain(-9, before, after, start, watch).startswith("the workload was killed by "
                                                               "SIGKILL, and no OOM kill")
    before.host_oom_kills, after.host_oom_kills = 7, 8
    assert explain(-9, before, after).startswith("the kernel's OOM killer killed the workload")
    before.host_oom_kills = 8
    assert explain(-15, before, after) == "the workload was killed by SIGTERM."


def test_explain_names_the_pids_level_and_its_peak():
    before, after = KernelCounters(), KernelCounters()
    before.pids_events = {"/a": 1, "/a/b": 0}
    after.pids_events = {"/a": 1, "/a/b": 2}
    after.pids_max, after.pids_peak, after.pids_where = 40, 39, "/a/b"
    said = explain(1, before, after)
    assert said == ("the pids limit was reached: pids.current hit 39/40 and the kernel refused 2 "
                    "thread or process creation(s) (EAGAIN) (the pids.max of /a/b); lower the "
                    "thread caps or raise limits.pids.")
    survived = explain(0, before, after)
    assert survived.startswith("the workload exited with status 0, but the pids limit was "
                               "reached on the way: pids.current hit 39/40")
    # no peak counted: the limit itself is what was reached
    after.pids_peak = None
    assert "pids.current reached 40 and the kernel refused 2" in explain(1, before, after)
    after.pids_events = {"/a": 1, "/a/b": 0}
    assert explain(1, before, after) == "the workload exited with its own status 1."
    # a kernel that counts refusals in one place only (no per-level counters)
    before.pids_events, after.pids_events = {}, {}
    before.pids_events_max, after.pids_events_max = 3, 4
    assert "refused 1 thread" in explain(1, before, after)


def test_oom_kill_with_many_threads_names_their_stacks():
    before, after = KernelCounters(), KernelCounters()
    before.oom_kills, after.oom_kills = 0, 1
    after.memory_limit, after.memory_peak = 64 << 20, 64 << 20
    said = explain(-9, before, after, start_of(), watch_of(threads=1447))
    assert said == ("the memory limit of 64MiB killed the workload: the cgroup's OOM-kill "
                    "counter rose by 1 (peak 64MiB); it ran 1447 threads, each charging its "
                    "kernel stack and the stack it touched; raise limits.memory above the peak "
                    "it needs (`launcher run --write-profile FILE` measures it), or make it "
                    "need less (fewer processes, a smaller batch).")
    assert "threads" not in explain(-9, before, after, start_of(), watch_of(threads=99))


def _tree(tmp_path: Path, files: dict[str, str], cgroup: str = "0::/job/run\n") -> Path:
    mountinfo = ("24 30 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - "
                 "cgroup2 cgroup2 rw,nsdelegate\n")
    return host(tmp_path / "host", {"proc/self/cgroup": cgroup,
                                     "proc/self/mountinfo": mountinfo, **files})


def test_read_counters_takes_each_figure_from_its_level(tmp_path):
    from launcher.supervise.diagnose import read_counters

    job, run = "sys/fs/cgroup/job", "sys/fs/cgroup/job/run"
    ctl = "cpu memory pids\n"
    root = _tree(tmp_path, {
        "sys/fs/cgroup/cgroup.controllers": ctl, f"{job}/cgroup.controllers": ctl,
        f"{run}/cgroup.controllers": ctl,
        "proc/vmstat": "pgfault 5\noom_kill 7\n",
        f"{job}/pids.max": "50\n", f"{job}/pids.current": "10\n", f"{job}/pids.events": "max 3\n",
        f"{run}/pids.max": "max\n", f"{run}/pids.current": "10\n", f"{run}/pids.peak": "12\n",
        f"{run}/pids.events": "max 1\n", f"{run}/memory.max": "104857600\n",
        f"{run}/memory.peak": "99999\n",
        f"{run}/memory.events": "low 0\nhigh 0\nmax 4\noom 1\noom_kill 2\n"})
    c = read_counters(root)
    # the level with the least headroom binds; its own peak is missing: the nearest one's
    assert (c.pids_max, c.pids_where, c.pids_peak) == (50, str(root / job), 12)
    assert c.pids_events == {str(root / run): 1, str(root / job): 3}
    assert c.pids_events_max == 3
    assert (c.oom_kills, c.memory_limit, c.memory_peak) == (2, 100 << 20, 99999)
    assert c.host_oom_kills == 7
    # the binding level's own peak wins over a nearer one
    (root / job / "pids.peak").write_text("49\n")
    assert read_counters(root).pids_peak == 49
    # the exit file's peak is the nearest level's (the run's own): an ancestor's pids.peak
    # counts launcher and anything else beside the run (an H200 host's outer pids.max 115:
    # 95 there against the run's 90, 2026-11-26)
    assert read_counters(root).pids_peak_nearest == 12
    from launcher.supervise.record import exit_record
    assert exit_record(0, "ok", read_counters(root), read_counters(root))["pids_peak"] == 12
    # no limit: at or above 2^62 is the kernel's "max" written as a number
    (root / run / "memory.max").write_text(f"{1 << 62}\n")
    assert read_counters(root).memory_limit is None
    (root / run / "memory.max").write_text(f"{(1 << 62) - 1}\n")
    assert read_counters(root).memory_limit == (1 << 62) - 1


def test_read_counters_on_cgroup_v1_and_on_no_cgroup(tmp_path):
    from launcher.supervise.diagnose import read_counters

    root = tmp_path / "v1"
    shutil.copytree(ROOT / "tests/fixtures/hosts/v1-docker", root)
    (root / "sys/fs/cgroup/memory/memory.max_usage_in_bytes").write_text("123456\n")
    c = read_counters(root)
    assert c.memory_peak == 123456 and c.memory_limit is not None
    assert c.oom_kills is not None
    empty = read_counters(tmp_path / "nothing")
    assert (empty.pids_max, empty.memory_peak, empty.host_oom_kills) == (None, None, None)


def test_refusals_and_kills_count_from_before_even_where_before_read_nothing():
    before, after = KernelCounters(), KernelCounters()
    after.pids_events, after.pids_max = {"/new": 1}, 8  # a level that appeared
    assert "refused 1 thread" in explain(1, before, after)
    after.pids_events, after.pids_events_max = {}, 1  # one counter, unread before
    assert "refused 1 thread" in explain(1, before, after)
    after = KernelCounters()
    after.host_oom_kills = 1
    assert explain(-9, before, after).startswith("the kernel's OOM killer killed")


def test_the_oom_sentence_names_threads_from_a_hundred():
    before, after = KernelCounters(), KernelCounters()
    before.oom_kills, after.oom_kills = 0, 1
    assert "it ran 100 threads" in explain(-9, before, after, start_of(), watch_of(threads=100))
