"""One figure, one meaning (issue 23, item 1): the threads a check compares with the budget are
the threads every line prints (the start line, plan, the refusal, the report), and `plan` gives
the verdict `run` gives for the same limits, with the workload's own threads counted."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docker_helpers import in_process, profile

LAUNCHER = [sys.executable, "-m", "launcher"]
FIGURE = re.compile(r"~(\d+) threads \(~(\d+) per process \+ 1 supervisor"
                    r"(?: \+ (\d+) of the workload's own)?\)")


def launcher(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LAUNCHER, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def _pids(tmp_path: Path, pids: int) -> Path:
    return Path(profile(tmp_path, f"p{pids}", f"extends: auto\nlimits:\n  pids: {pids}\n"))


def plan_json(tmp_path: Path, *args: str) -> dict:
    out = in_process("plan", *args, "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_refusal_prints_the_figure_it_compared_and_a_plan_that_agrees(tmp_path,
                                                                           monkeypatch):
    monkeypatch.setenv("LAUNCHER_RUNS_DIR", str(tmp_path / "runs"))
    total = plan_json(tmp_path, "--workload", "stress-jax")["estimate"]["total"]
    prof = _pids(tmp_path, total - 1)  # one short of the whole run, workload's sampler included
    run = launcher("run", "--profile", str(prof), "--runtime", "native",
                   "stress-jax", "--phase", "1", "--quick", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    m = FIGURE.search(run.stderr)
    assert m, run.stderr
    assert int(m.group(1)) == total > total - 1  # the figure said is the figure compared
    assert f"would exceed the pids limit {total - 1}." in run.stderr
    assert m.group(3) == "1"  # stress-jax's own sampler, named
    assert not (tmp_path / "runs").exists(), "a refused run leaves no run folder"
    # the hint is a command that works when pasted, and its verdict is the run's
    hint = re.search(r"\(see `(launcher plan [^`]+)`\)", run.stderr)
    assert hint, run.stderr
    words = shlex.split(hint.group(1))
    assert "--workload" in words and str(prof) in words
    pasted = launcher(*words[1:], cwd=tmp_path)
    assert pasted.returncode == 0, pasted.stderr
    assert "verdict: REFUSE" in pasted.stdout
    assert FIGURE.search(pasted.stdout).group(1) == str(total), pasted.stdout


@pytest.mark.parametrize("workload", ["stress-jax", "tf-train"])
def test_plan_and_a_run_give_the_same_verdict_at_every_limit(tmp_path, workload):
    total = plan_json(tmp_path, "--workload", workload)["estimate"]["total"]
    levels = set()
    for pids in range(total - 2, int(total / 0.8) + 2):
        prof = str(_pids(tmp_path, pids))
        plan = plan_json(tmp_path, "--profile", prof, "--workload", workload)
        dry = launcher("run", "--profile", prof, "--runtime", "native", "--dry-run", "--json",
                       workload, cwd=tmp_path)
        assert dry.returncode == 0, dry.stderr
        ran = json.loads(dry.stdout)
        assert ran["threads_estimate"]["total"] == plan["estimate"]["total"] == total
        assert ran["verdict"] == plan["verdict"], (pids, ran["verdict"], plan["verdict"])
        levels.add(plan["verdict"]["level"])
    assert levels == {"ok", "warn", "refuse"}  # the sweep crossed both boundaries


def test_the_start_line_and_the_report_print_the_figure_the_plan_checked(tmp_path,
                                                                         monkeypatch):
    monkeypatch.setenv("LAUNCHER_RUNS_DIR", str(tmp_path / "runs"))
    prof = str(_pids(tmp_path, 40))
    total = plan_json(tmp_path, "--profile", prof)["estimate"]["total"]
    run = launcher("run", "--profile", prof, "--runtime", "native", "--name", "fig", "--",
                   sys.executable, "-c", "pass", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    start = run.stderr.splitlines()[0]
    assert FIGURE.search(start) and FIGURE.search(start).group(1) == str(total), start
    report = in_process("report", "runs/fig", cwd=tmp_path)
    assert f", {total} estimated by the plan" in report.stdout, report.stdout


PRINT_MEMORY_LIMIT = r"""
import pathlib
for line in open('/proc/self/cgroup'):
    _, ctrl, path = line.strip().split(':', 2)
    if 'memory' in ctrl.split(','):
        print(pathlib.Path('/sys/fs/cgroup/memory' + path, 'memory.limit_in_bytes').read_text())
    elif ctrl == '' and pathlib.Path('/sys/fs/cgroup' + path, 'memory.max').exists():
        print(pathlib.Path('/sys/fs/cgroup' + path, 'memory.max').read_text())
"""


def test_a_memory_limit_above_the_hosts_memory_is_lowered_with_a_warning(tmp_path,
                                                                         monkeypatch):
    """As a ulimit is lowered to the hard limit: the run gets this host's memory, says so, and
    the figure it prints is the one its cgroup holds."""
    from launcher.probe import probe_host
    from launcher.units import format_size

    monkeypatch.setenv("LAUNCHER_RUNS_DIR", str(tmp_path / "runs"))
    host = probe_host("/").host_memory()
    prof = tmp_path / "big.yaml"
    prof.write_text(f"extends: auto\nlimits:\n  memory: {4 * host}\n")
    run = launcher("run", "--profile", str(prof), "--runtime", "native", "--",
                   sys.executable, "-c", PRINT_MEMORY_LIMIT, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert (f"warning: memory limit: profile limits.memory ({prof.name}:3) = "
            f"{format_size(4 * host)}, lowered to this host's memory {format_size(host)}"
            in run.stderr), run.stderr
    assert f"memory {format_size(host)} (cgroup" in run.stderr  # the start line's figure
    assert int(run.stdout.split()[-1]) <= host  # the kernel holds no more than was said
    shown = plan_json(tmp_path, "--profile", str(prof))["limits"]["memory"]
    assert shown["value"] == host and "lowered" in shown["source"]
    rendered = in_process("render", "--profile", str(prof), "--out", "r", cwd=tmp_path)
    assert rendered.returncode == 0, rendered.stderr  # for another machine: not lowered
    import yaml
    (svc,) = yaml.safe_load((tmp_path / "r/compose.yaml").read_text())["services"].values()
    assert svc["mem_limit"] == 4 * host


def test_a_run_gives_every_refusal_at_once_before_asking_for_a_framework(tmp_path,
                                                                         monkeypatch):
    """The checks that cost nothing come first, all in one line (the pids budget and the GPUs
    the profile asks for); `pip install jax` is asked for only of a run that would start."""
    import importlib.util

    from click.testing import CliRunner

    from launcher.cli.main import app

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "jax" else real(name, *a))
    prof = tmp_path / "lap.yaml"
    prof.write_text("extends: gtx1650\nlimits: {pids: 22}\n")
    runner = CliRunner()
    refused = runner.invoke(app, ["run", "-p", str(prof), "--runtime", "native",
                                  "stress-jax", "--phase", "1", "--quick"])
    assert refused.exit_code == 1
    assert "would exceed the pids limit 22" in refused.stderr, refused.stderr
    assert "use --gpus none" in refused.stderr and "needs jax" not in refused.stderr
    prof.write_text("extends: gtx1650\n")
    asked = runner.invoke(app, ["run", "-p", str(prof), "--runtime", "native", "--gpus",
                                "none", "stress-jax", "--phase", "1", "--quick"])
    assert asked.exit_code == 1 and "stress-jax needs jax" in asked.stderr, asked.stderr
