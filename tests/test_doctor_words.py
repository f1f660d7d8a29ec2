"""`launcher doctor` in words (issue 23): the tasks kernel.pid_max and kernel.threads-max leave
are the limit less the tasks already running (/proc/loadavg), as the budget checks them; a pids
controller without a pids.current says so; a deprecated inherited variable is named once."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from launcher.cli.doctor_cmd import _pids
from launcher.cli.main import app
from launcher.probe import probe_host
from tests.conftest import HOSTS
from tests.host_trees import LIMITED, host

runner = CliRunner()
RUNNING = 124  # /proc/loadavg's running/total: 3 of 124 tasks


def _busy(dest: Path, **kernel: str) -> Path:
    """The captured hybrid-host tree (pids controller at the root, no pids.max or pids.current;
    pid_max 32768, threads-max 192730) with a /proc/loadavg of 124 tasks; kernel: sysctl files
    changed (threads_max="500")."""
    shutil.copytree(HOSTS / "hybrid-host", dest)
    files = {"proc/loadavg": f"0.52 0.58 0.59 3/{RUNNING} 15333\n"}
    files.update({f"proc/sys/kernel/{k.replace('_', '-') if k == 'threads_max' else k}": v + "\n"
                  for k, v in kernel.items()})
    return host(dest, files)


def _doctor(root: Path, *args: str) -> dict[str, str]:
    out = runner.invoke(app, ["doctor", "--host-root", str(root), *args])
    assert out.exit_code == 0, out.output
    return {line[:15].strip(): line[15:] for line in out.stdout.splitlines()
            if line[:1].strip() and line[14:15] == " "}


def test_pid_max_leaves_the_limit_less_the_tasks_running(tmp_path: Path):
    root = _busy(tmp_path / "host")
    rows = _doctor(root)
    assert rows["first limit"] == (f"kernel.pid_max 32768 ({RUNNING} tasks running): "
                                   f"{32768 - RUNNING} tasks available")
    assert rows["kernel"].endswith(f"; {RUNNING} tasks running (threads-max and pid_max "
                                   f"count them)")
    data = json.loads(runner.invoke(app, ["doctor", "--host-root", str(root), "--json"]).stdout)
    assert data["first_limit"]["available"] == 32768 - RUNNING  # the figure printed is checked
    assert data["host"]["tasks"] == RUNNING


def test_threads_max_leaves_the_limit_less_the_tasks_running(tmp_path: Path):
    rows = _doctor(_busy(tmp_path / "host", threads_max="500"))
    assert rows["first limit"] == (f"kernel.threads-max 500 ({RUNNING} tasks running): "
                                   f"{500 - RUNNING} tasks available")


def test_the_verdict_checks_the_tasks_left(tmp_path: Path):
    """pid_max 125 with 124 tasks running leaves 1: the plan's ~2 threads exceed it."""
    prof = tmp_path / "one.yaml"
    prof.write_text("extends: base\nthreads: {intra_op: 1, inter_op: 1}\n")
    out = runner.invoke(app, ["doctor", "--profile", str(prof), "--host-root",
                              str(_busy(tmp_path / "host", pid_max="125")), "--json"])
    assert out.exit_code == 0, out.output
    plan = json.loads(out.stdout)["plan"]
    assert {k: plan["budget"][k] for k in ("available", "binding")} == {
        "available": 125 - RUNNING, "binding": f"kernel.pid_max 125 ({RUNNING} tasks running)"}
    assert plan["verdict"]["level"] == "refuse"
    assert any(r.endswith(f"would exceed the kernel.pid_max 125 ({RUNNING} tasks running).")
               for r in plan["verdict"]["reasons"])


def test_a_pids_controller_without_pids_current_says_so(tmp_path: Path):
    """The captured hybrid host: the pids controller's root cgroup has neither pids.max nor
    pids.current (the issue's `max unlimited, current -`)."""
    rows = _doctor(_busy(tmp_path / "host"))
    assert rows["pids"] == "no limit (pids.current not readable here)"
    assert rows["kernel"].endswith(f"; {RUNNING} tasks running (threads-max and pid_max "
                                   f"count them)")
    limited = probe_host(LIMITED, environ={})
    assert _pids(limited) == "max 77 (set at /sys/fs/cgroup/job), current 3"
    unread = dataclasses.replace(limited, cgroup=dataclasses.replace(limited.cgroup,
                                                                      pids_current=None))
    assert _pids(unread) == "max 77 (set at /sys/fs/cgroup/job); pids.current not readable here"
    assert _doctor(LIMITED)["kernel"].endswith("; tasks running unknown (no /proc/loadavg here)")


@pytest.mark.parametrize("args", [["doctor", "--host-root", str(LIMITED)],
                                  ["doctor", "--host-root", str(LIMITED), "--profile", "base"],
                                  ["plan"]])
def test_a_deprecated_inherited_variable_is_named_once(args: list[str],
                                                       monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OMP_NESTED", "TRUE")
    out = runner.invoke(app, args)
    assert out.exit_code == 0, out.output
    said = [line for line in out.stdout.splitlines() if "OMP_NESTED=TRUE" in line]
    assert said == ["  - OMP_NESTED=TRUE is deprecated; launcher removes it (use "
                    "OMP_MAX_ACTIVE_LEVELS)."]


def test_the_supervisors_lines_name_a_deprecated_variable_once():
    """What `launcher run` and the supervisor print before the workload (supervise.report)."""
    from launcher.caps.resolve import resolve
    from launcher.probe import probe_host
    from launcher.profiles import load_profile
    from launcher.supervise.report import report

    env = {"OMP_NESTED": "TRUE", "OMP_NUM_THREADS": "32"}
    caps = resolve(load_profile("base"), probe_host(LIMITED, environ=env), inherited=env).caps
    said: list[str] = []
    report(caps, False, said.append)
    assert [s for s in said if "OMP_NESTED" in s] == [
        "warning: OMP_NESTED=TRUE is deprecated; launcher removes it (use "
        "OMP_MAX_ACTIVE_LEVELS)."]
    assert any(s.startswith("OMP_NUM_THREADS=32 was inherited; set ") for s in said)
