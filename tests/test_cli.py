"""The CLI through click's runner (in-process) and as a real process for start-up behaviour."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from launcher.cli.main import app
from tests.conftest import HOSTS, ROOT

runner = CliRunner()


def _commands(help_text: str) -> list[str]:
    """The command names listed under "Commands:" in a help text."""
    lines = help_text.split("Commands:\n", 1)[1].splitlines()
    return [line.split()[0] for line in lines if line.startswith("  ") and line.strip()]


def test_help_lists_commands():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    assert _commands(result.stdout) == ["doctor", "plan", "render", "build", "run", "examples",
                                        "workloads", "report", "calibrate", "bench-memory",
                                        "profiles", "jobs"]
    sub = runner.invoke(app, ["profiles", "--help"])
    assert _commands(sub.stdout) == ["list", "show", "validate"]
    jobs = runner.invoke(app, ["jobs", "--help"])
    assert _commands(jobs.stdout) == ["plan", "run", "render", "status", "ray-node"]


def test_help_imports_no_heavy_module():
    code = ("import sys; from launcher.cli.main import app\n"
            "heavy = [m for m in ('docker', 'jinja2', 'yaml', 'pydantic', 'rich') "
            "if m in sys.modules]\nprint(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True).stdout
    assert out.strip() == "[]"


def test_profiles_list_and_show():
    result = runner.invoke(app, ["profiles", "list", "--json"])
    assert result.exit_code == 0
    names = [r["name"] for r in json.loads(result.stdout)]
    assert names == ["auto", "base", "docker-5gpu", "gtx1650", "rig-6600", "runpod"]
    result = runner.invoke(app, ["profiles", "show", "rig-6600"])
    assert result.exit_code == 0
    assert "gfx_version:" in result.stdout and "profiles/rig-6600.yaml:15" in result.stdout
    data = json.loads(runner.invoke(app, ["profiles", "show", "gtx1650", "--json"]).stdout)
    assert data["chain"] == ["base", "gtx1650"]
    # `path` as the messages name it; `file` where it is (in a wheel: inside the package)
    assert data["path"] == "profiles/gtx1650.yaml"
    from launcher.profiles.loader import shipped_dir

    assert data["file"] == str(shipped_dir() / "gtx1650.yaml") and Path(data["file"]).is_file()
    assert data["profile"]["allocator"]["torch"] == "max_split_size_mb:32"


def test_validate_reports_each_file(tmp_path):
    good = ROOT / "profiles" / "gtx1650.yaml"
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nlimits:\n  pids: -1x\n")
    result = runner.invoke(app, ["profiles", "validate", str(good), str(bad)])
    assert result.exit_code == 1
    assert f"ok: {good}" in result.stdout
    assert "bad.yaml:3: limits.pids:" in result.stderr
    as_json = runner.invoke(app, ["profiles", "validate", "--json", str(good), str(bad)])
    assert as_json.exit_code == 1 and as_json.stderr == ""
    ok, wrong = json.loads(as_json.stdout)
    assert ok == {"file": str(good), "ok": True, "error": None}
    assert not wrong["ok"] and "bad.yaml:3: limits.pids:" in wrong["error"]


def test_doctor_json_on_fixture_host():
    result = runner.invoke(app, ["doctor", "--json", "--host-root", str(HOSTS / "v2-limited")],
                           env={"OMP_NUM_THREADS": "32"})
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["host"]["cgroup"]["pids_max"] == 77
    assert data["host"]["cgroup"]["cpu_quota"] == 1.5
    assert data["first_limit"]["binding"] == "pids.max 77 of /sys/fs/cgroup/job (pids.current 3)"
    assert any(w.startswith("OMP_NUM_THREADS=32 inherited from the shell") for w in
               data["warnings"])


def test_doctor_text_and_profile_verdict():
    result = runner.invoke(app, ["doctor", "--profile", "rig-6600",
                                 "--host-root", str(HOSTS / "v1-docker")])
    assert result.exit_code == 0, result.output
    assert "max 77 (set at /sys/fs/cgroup/pids), current 1" in result.stdout
    # 12 torch processes, each seeing its own GPU: ~49 threads take 64% of pids.max 77, and
    # their memory most of the budget
    assert "verdict: WARN" in result.stdout
    assert "threads at their peak: ~49 threads (12 processes x ~4 + 1 supervisor); budget 76" \
        in result.stdout


def test_doctor_names_only_the_controllers_present(tmp_path):
    """The GPU host's layout: the parent delegates only memory, so the caller's cgroup has no
    pids controller; doctor says so rather than `pids max unlimited` at a cgroup without it."""
    import shutil

    host = tmp_path / "h"
    shutil.copytree(HOSTS / "v2-limited", host)
    job = host / "sys/fs/cgroup/job"
    (job / "cgroup.controllers").write_text("memory\n")
    for name in ("pids.max", "pids.current", "cpu.max", "cpuset.cpus.effective"):
        (job / name).unlink()
    result = runner.invoke(app, ["doctor", "--host-root", str(host)])
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line for line in result.stdout.splitlines() if line.strip()}
    assert rows["cgroup"].split(None, 1)[1] == "v2 (memory: /sys/fs/cgroup/job)"
    assert rows["pids"].split(None, 1)[1] == "no pids controller on this cgroup or above it"
    assert "set at /sys/fs/cgroup/job" in rows["memory"]


def test_plan_text_and_bad_framework():
    result = runner.invoke(app, ["plan", "-p", "docker-5gpu", "--host-root",
                                 str(HOSTS / "v2-limited"), "--processes", "5"])
    assert result.exit_code == 0, result.output
    assert "TF_NUM_INTEROP_THREADS" in result.stdout and "verdict:" in result.stdout
    result = runner.invoke(app, ["plan", "-f", "mxnet"])
    assert result.exit_code == 1
    assert "error: --framework must be one of jax, none, tf, torch (got 'mxnet')" in result.stderr


def test_malformed_host_is_one_line_error():
    proc = subprocess.run(
        [sys.executable, "-m", "launcher", "doctor", "--host-root", str(HOSTS / "v2-malformed")],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 1
    assert proc.stderr.strip().endswith("malformed cpu.max line 'lots of cpu'")
    assert "Traceback" not in proc.stderr


def test_env_override_syntax():
    result = runner.invoke(app, ["plan", "--env", "NOEQUALS"])
    assert result.exit_code == 1
    assert "--env: expected NAME=VALUE (got 'NOEQUALS')" in result.stderr


def test_doctor_capture_round_trip(tmp_path):
    result = runner.invoke(app, ["doctor", "--capture", str(tmp_path / "cap"), "--host-root",
                                 str(HOSTS / "v2-limited")])
    assert result.exit_code == 0, result.output
    back = runner.invoke(app, ["doctor", "--json", "--host-root", str(tmp_path / "cap")])
    orig = runner.invoke(app, ["doctor", "--json", "--host-root", str(HOSTS / "v2-limited")])
    def strip(text: str, root: Path) -> dict:  # type: ignore[type-arg]
        host = json.loads(text)["host"]
        host.pop("root")
        for key in ("dirs", "binding"):
            host["cgroup"][key] = {k: str(Path(v).relative_to(root))
                                   for k, v in host["cgroup"][key].items()}
        return host

    assert strip(back.stdout, tmp_path / "cap") == strip(orig.stdout, HOSTS / "v2-limited")


def test_the_readme_synopsis_lists_only_options_each_command_has():
    """Each `launcher CMD ... [--opt]` of the command table (docs/commands.md) names options CMD has
    (`jobs plan` once listed `--runtime`, which only `jobs run` takes). In `a / b ARGS [--x]`
    the options belong to `b` and to the bare `a` before it."""
    import re

    import click

    from tests.conftest import ROOT

    root = app
    rows = [x for x in (ROOT / "docs" / "commands.md").read_text().splitlines()
            if x.startswith("| `launcher ")]
    checked = 0
    for row in rows:
        for synopsis in re.findall(r"`(launcher [^`]+)`", row.split(" | ")[0]):
            words = synopsis.split()[1:]
            group: click.Command = root
            while words and isinstance(group, click.Group) \
                    and isinstance(group.get_command(None, words[0]), click.Group):
                group = group.get_command(None, words.pop(0))
            bare: list[str] = []
            for part in " ".join(words).split(" / "):
                name, _, rest = part.partition(" ")
                options = set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", rest))
                if not options:
                    bare.append(name)
                    continue
                for each in [*bare, name]:
                    cmd = group.get_command(None, each) if isinstance(group, click.Group) \
                        else group
                    # the command's own settings: a Context without them would leave click's
                    # cached help option without `-h` for the tests after this one
                    have = {o for p in cmd.get_params(click.Context(cmd, **cmd.context_settings))
                            for o in (*p.opts, *p.secondary_opts)}
                    assert options <= have, (synopsis, each, sorted(options - have))
                    checked += 1
                bare = []
    assert checked >= 10


def test_launcher_run_imports_no_typer(tmp_path):
    """`launcher run` is its click command alone (cli/entry.py): typer's import is ~20 ms of
    every run (benchmarks/startup.py); with the profile cache warm, no PyYAML either."""
    code = ("import atexit, sys\nsys.argv = ['launcher', 'run', '--runtime', 'native', "
            "'--dry-run', '--', 'true']\natexit.register(lambda: print(sorted(m for m in "
            "('typer', 'yaml', 'importlib.resources', 'hashlib') if m in sys.modules)))\n"
            "from launcher.cli.entry import main\nmain()\n")  # run's end: atexit, then out
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    for _ in range(2):  # the first parses the profiles and keeps them
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=60, env=env)
        assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


@pytest.mark.parametrize("argv", [
    ["plan", "-p", "no-such-profile", "--json"],
    ["profiles", "show", "no-such-profile", "--json"],
    ["doctor", "-p", "no-such-profile", "--json"],
    ["run", "-p", "no-such-profile", "--dry-run", "--json", "--", "true"],
    ["jobs", "plan", "no-such-job.yaml", "--json"],
    ["jobs", "render", "no-such-job.yaml", "--out", "never-written", "--json"],
    ["jobs", "status", "no-such-job.yaml", "--json"],
    ["report", "no-such-run", "--json"],
])
def test_a_mistake_under_json_is_one_error_line_and_no_half_json(argv, tmp_path, monkeypatch):
    """A script reads stdout only when the exit status is 0: a mistake prints nothing there."""
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, argv)
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    assert not (tmp_path / "never-written").exists()
