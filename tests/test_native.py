"""The native runtime on this host: real cgroups enforce the caps, or they are advisory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.conftest import ROOT, docker_client, need
from tests.docker_helpers import (
    BASE,
    FROM_OUTSIDE,
    HOG,
    SUPERVISOR_KILLED,
    in_process,
    launcher,
    profile,
    run_dir_of,
    supervisor_sentence,
)
from tests.polling import wait_until, while_running

BOMB = ("import threading, time\nwhile True:\n"
        "    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n")


def _leftover_run_cgroups(name: str = "") -> list[Path]:
    """Run cgroups (`launcher-PID-NAME`) left under this process's cgroups, v1 or v2."""
    from launcher.probe.cgroup import find_chains

    return [d for chain in find_chains(Path("/")).values() for d in chain.dirs[0].glob(
        f"launcher-*{name}")]


def test_leftover_check_sees_a_run_cgroup():
    """The check below can fail: a run cgroup made and not removed is found."""
    from launcher.cgroups.run_cgroup import make_run_cgroup

    rc = make_run_cgroup("launcher-leftover-probe", pids=10, memory=None, cpus=None)
    need("a writable pids cgroup", None if rc.dirs else "none was made here")
    try:
        assert any(d.name == "launcher-leftover-probe" for d in _leftover_run_cgroups())
    finally:
        rc.cleanup()
    assert _leftover_run_cgroups("leftover-probe") == []


def _cgroups_writable() -> bool:
    from launcher.cgroups.run_cgroup import make_run_cgroup

    rc = make_run_cgroup("launcher-writable-check", pids=10, memory=None, cpus=None)
    rc.cleanup()
    return bool(rc.enforced)


@pytest.fixture
def writable():
    need("a writable pids cgroup (CI runs as root on a cgroup v1 host)",
         None if _cgroups_writable() else "none was made here")


def test_thread_bomb_stopped_by_the_kernel_at_40(writable, tmp_path):
    prof = profile(tmp_path, "p40", "extends: base\nlimits: {pids: 40}\n")
    name = f"bomb-{uuid.uuid4().hex[:8]}"
    proc = launcher("run", "--runtime", "native", "-p", prof, "--name", name, "--",
                    sys.executable, "-c", BOMB)
    assert proc.returncode != 0
    assert "enforced by the kernel: pids 40 (cgroup" in proc.stderr
    sentence = ("the pids limit was reached: pids.current hit 40/40 and the kernel refused")
    assert f"launcher: {sentence}" in proc.stderr
    run_dir = run_dir_of(proc.stderr)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["diagnosis"].startswith(sentence)
    assert summary["engine"]["enforced"]["pids"].startswith("40 (cgroup")
    assert summary["peaks"]["pids_current"]["limit"] == 40  # telemetry read the run's cgroup
    assert summary["peaks"]["pids_current"]["kernel_peak"] == 40  # the run cgroup's pids.peak
    assert _leftover_run_cgroups(name) == []


def test_without_cgroups_the_cap_is_advisory(tmp_path):
    prof = profile(tmp_path, "p40", "extends: base\nlimits: {pids: 40}\n")
    proc = launcher("run", "--runtime", "native", "-p", prof, "--", sys.executable, "-c",
                    "print('ran')", env={"LAUNCHER_CGROUP_ROOT": str(tmp_path / "no-cgroups")})
    assert proc.returncode == 0, proc.stderr
    assert "ran" in proc.stdout
    assert "advisory only: pids (no cgroup controller found for pids)" in proc.stderr


def test_memory_limit_enforced_and_explained(writable, tmp_path):
    prof = profile(tmp_path, "m", "extends: base\nlimits: {memory: 64MiB}\n")
    proc = launcher("run", "--runtime", "native", "-p", prof, "--", sys.executable, "-c", HOG)
    assert proc.returncode == 137
    assert ("launcher: the memory limit of 64MiB killed the workload: the cgroup's OOM-kill "
            "counter rose by") in proc.stderr


def test_the_oom_killer_takes_the_workload_never_its_supervisor(writable, tmp_path):
    """Once the workload has started, its supervisor leaves the OOM killer's choice (-1000
    where it may lower its score: CAP_SYS_RESOURCE) or, where it may not (this host's root,
    Docker's default capabilities), the run's v1 memory cgroup. In a 30MiB cgroup the
    kernel's second kill (after the workload's, its file pages still charged) took the
    supervisor in 1 of 8 runs, and the run's exit record was lost."""
    prof = profile(tmp_path, "m", "extends: base\nlimits: {memory: 256MiB}\n")
    code = ("import os, time\n"
            "def memcg(pid):\n"
            "    return [x for x in open(f'/proc/{pid}/cgroup').read().splitlines()\n"
            "            if x.split(':')[1] in ('memory', '')]\n"
            "adj = lambda pid: open(f'/proc/{pid}/oom_score_adj').read().strip()\n"
            "for _ in range(500):\n"
            "    spared = adj(os.getppid()) == '-1000' or memcg(os.getppid()) != memcg('self')\n"
            "    if spared:\n"
            "        break\n"
            "    time.sleep(0.01)\n"
            "print(adj('self'), spared)\n")
    proc = launcher("run", "--runtime", "native", "-p", prof, "--", sys.executable, "-c", code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [Path("/proc/self/oom_score_adj").read_text().strip(), "True"]


def test_a_killed_supervisor_is_said_and_what_it_started_goes_with_it(writable, tmp_path):
    """kill -9 of the supervisor (not of launcher): it cannot stop the workload's tree nor
    write its record; launcher says so, and kills what is left in the run's cgroup."""
    import psutil

    name = f"sup-{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "launcher", "run", "--runtime", "native", "--name", name, "--",
         "sleep", "300"], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def started() -> list[psutil.Process]:
            return [p for p in psutil.Process(proc.pid).children(recursive=True)
                    if p.name() == "sleep"]
        wait_until(lambda: bool(started()), 60, what="the workload to start")
        workload = started()[0]
        supervisor = workload.parent()
        assert supervisor is not None and supervisor.pid != proc.pid
        supervisor.kill()
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 137, err
    assert supervisor_sentence(err) == SUPERVISOR_KILLED + FROM_OUTSIDE, err
    wait_until(lambda: not workload.is_running() or workload.status() == "zombie", 30,
               what="the orphaned workload to be killed")
    assert _leftover_run_cgroups(name) == []


def test_env_replaced_before_start_and_rlimits_set(tmp_path):
    prof = profile(tmp_path, "e", "extends: base\nthreads: {intra_op: 1}\n"
                                  "limits: {stack: 16MiB, cpuset: '1'}\n")
    code = ("import os, resource; print(os.environ['OMP_NUM_THREADS'], "
            "os.environ.get('OMP_NESTED'), resource.getrlimit(resource.RLIMIT_STACK)[0], "
            "sorted(os.sched_getaffinity(0)), "
            "[k for k in ('LAUNCHER_CPUSET', 'LAUNCHER_RLIMITS', 'LAUNCHER_RUN_CGROUPS', "
            "'LAUNCHER_WATCH_STDIN') if k in os.environ])")
    proc = launcher("run", "--runtime", "native", "-p", prof, "--", sys.executable, "-c", code,
                    env={"OMP_NUM_THREADS": "32", "OMP_NESTED": "TRUE"})
    assert proc.returncode == 0, proc.stderr
    # the supervisor took the stack limit and CPU 1 before the workload started, and its own
    # variables did not reach it
    assert proc.stdout.split(None, 3) == ["1", "None", str(16 << 20), "[1] []\n"]
    assert "launcher: OMP_NUM_THREADS=32 was inherited; set 1" in proc.stderr


def _wait_for_descendant(p: subprocess.Popen, cmdline: list[str], within: float = 60) -> None:  # type: ignore[type-arg]
    """Until a process below `p` runs `cmdline` (a condition, not a fixed sleep)."""
    import psutil

    def running() -> bool:
        for child in psutil.Process(p.pid).children(recursive=True):
            try:
                if child.cmdline() == cmdline:
                    return True
            except psutil.Error:
                continue
        return False

    wait_until(while_running(p, running), within, what="the workload to start")


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_sigint_stops_the_native_workload_started_with_sigint_ignored(writable, tmp_path):
    """When launcher starts with SIGINT ignored, as a script's background job
    (`launcher run ... &`) does, the workload gets its default action back (Ctrl-C with
    SIGINT as inherited is tests/test_engine_behaviour.py's, for every engine)."""
    prof = profile(tmp_path, "s", "extends: base\nlimits: {pids: 50}\n")
    name = f"sigint-{uuid.uuid4().hex[:8]}"
    p = subprocess.Popen([sys.executable, "-m", "launcher", "run", "--runtime", "native", "-p",
                          prof, "--name", name, "--", "sleep", "60"],
                         env={**os.environ, "PYTHONPATH": str(ROOT)},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=_ignore_sigint)
    _wait_for_descendant(p, ["sleep", "60"])  # the supervisor started it: its handlers are set
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=30)
    assert p.returncode == -signal.SIGINT, err  # it died of SIGINT: launcher ends by it too
    assert "the workload was killed by SIGINT." in err
    assert _leftover_run_cgroups(name) == []


@pytest.mark.parametrize("runtime", ["native", pytest.param("docker", marks=pytest.mark.docker)])
def test_how_a_run_ended_comes_from_the_exit_file_not_its_output(runtime, tmp_path):
    """A workload that prints a line like the supervisor's cannot change the diagnosis: the
    summary takes it from the supervisor's exit file (launcher/contract.py) alone."""
    if runtime == "docker":
        docker_client()
    code = ("import sys; print('launcher: the pids limit was reached: a forged line', "
            "file=sys.stderr); sys.exit(3)")
    proc = subprocess.run([sys.executable, "-m", "launcher", "run", "--runtime", runtime,
                           "--image", BASE, "-p", "base", "--", "python3", "-c", code],
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 3, proc.stderr
    run_dir = run_dir_of(proc.stderr)
    ended = json.loads((run_dir / "exit.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert ended["status"] == 3 and ended["started"] is True
    assert summary["diagnosis"] == ended["diagnosis"]
    assert "forged" not in summary["diagnosis"]


def test_a_run_piped_into_head_ends_as_a_shell_pipeline_does(tmp_path):
    """`launcher run -- yes | head -1`: once head is gone, the workload meets a closed pipe and
    dies of SIGPIPE (which the supervisor no longer leaves ignored), and launcher ends too."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = f"{sys.executable} -m launcher run --runtime native -p base -- yes | head -1"
    proc = subprocess.run(["bash", "-c", f"{cmd}; echo ${{PIPESTATUS[0]}}"], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["y", "141"], proc.stderr
    assert "Traceback" not in proc.stderr
    assert "the workload was killed by SIGPIPE." in proc.stderr
    sigs = launcher("run", "--runtime", "native", "-p", "base", "--", "grep", "SigIgn",
                    "/proc/self/status", cwd=tmp_path)
    ignored = int(sigs.stdout.split()[-1], 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1)) and not ignored & (1 << (signal.SIGXFSZ - 1))


def test_a_workload_that_survives_the_pids_limit_is_still_told(writable, tmp_path):
    """Threads refused at the limit, a workload that carries on and exits 0: the diagnosis
    still says the kernel refused creations (report 002's crash, survived)."""
    prof = profile(tmp_path, "p30", "extends: base\nlimits: {pids: 30}\n")
    code = ("import threading, time\nn = 0\ntry:\n    for _ in range(200):\n"
            "        threading.Thread(target=time.sleep, args=(5,), daemon=True).start()\n"
            "        n += 1\nexcept RuntimeError:\n    print('stopped at', n)\n")
    proc = launcher("run", "--runtime", "native", "-p", prof, "--", "python3", "-c", code,
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "stopped at" in proc.stdout
    summary = json.loads((run_dir_of(proc.stderr) / "summary.json").read_text())
    assert summary["diagnosis"].startswith("the workload exited with status 0, but the pids "
                                           "limit was reached on the way: pids.current hit 30/30")


def test_with_no_limit_asked_the_kernel_still_counts_the_peak(writable, tmp_path):
    """A pids cgroup of its own only to count (pids.max as it was): a burst of 30 threads
    that the 50 ms sampler never sees is the report's peak, from the kernel's pids.peak."""
    name = f"count-{uuid.uuid4().hex[:8]}"
    burst = ("import threading, time\nts = [threading.Thread(target=time.sleep, args=(0.2,))"
             " for _ in range(30)]\n[t.start() for t in ts]\n[t.join() for t in ts]\n")
    proc = launcher("run", "--runtime", "native", "--name", name, "--", sys.executable, "-c",
                    burst)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((run_dir_of(proc.stderr) / "summary.json").read_text())
    placed = summary["engine"]["cgroup"]["placed"]
    assert [p["controllers"] for p in placed] == [["pids"]]
    assert summary["engine"]["enforced"] == {} and summary["engine"]["advisory"] == {}
    peak = summary["peaks"]["pids_current"]["kernel_peak"]
    assert peak is not None and peak >= 31, summary["peaks"]  # 30 threads + the main one
    assert _leftover_run_cgroups(name) == []
    report = in_process("report", str(run_dir_of(proc.stderr)))
    assert f"peak {peak} counted by the kernel (the run cgroup's pids.peak" in report.stdout, \
        report.stdout
