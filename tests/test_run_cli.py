"""`launcher run` and `launcher build` through the CLI with a fake engine (a third party's,
installed as its own distribution: tests/plugins/launcher-fakes), and the exact configuration
sent to the daemon for the multi-GPU profiles (golden files)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from launcher.cli.main import app
from tests.conftest import GOLDEN, HOSTS, ROOT, check_golden

runner = CliRunner()


@pytest.fixture
def fake(fake_engine, monkeypatch):
    monkeypatch.setattr(fake_engine, "status", 3)
    return fake_engine


def _normal(text: str) -> str:
    """The parts that depend on who runs the test and where."""
    import os
    import re
    import socket

    from launcher.runtime.container import watch_needs

    text = text.replace(str(watch_needs()), "<psutil>")  # this interpreter's, wherever it is
    text = text.replace(str(ROOT), "<repo>")
    text = re.sub(rf'"{re.escape(socket.gethostname())}:\d+"', '"<host>:<pid>"', text)
    return text.replace(f'"{os.getuid()}:{os.getgid()}"', '"<uid>:<gid>"')


@pytest.mark.parametrize("name", ["rig-6600", "docker-5gpu"])
def test_dry_run_json_golden(name, update_golden):
    result = runner.invoke(app, ["run", "-p", name, "--runtime", "docker", "--host-root",
                                 str(HOSTS / name), "--image", "launcher/test:1", "--dry-run",
                                 "--json", "--name", "golden", "--no-mount-cwd", "--",
                                 "python3", "train.py"])
    assert result.exit_code == 0, result.output
    check_golden(GOLDEN / "run" / f"{name}.json", _normal(result.stdout), update_golden)


def _dry(*args: str) -> dict:  # type: ignore[type-arg]
    result = runner.invoke(app, ["run", "--runtime", "docker", "--dry-run", "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_dry_run_contents():
    rig = _dry("-p", "rig-6600", "--host-root", str(HOSTS / "rig-6600"), "--gpus", "0,3",
               "--", "true")
    host = rig["request"]["body"]["HostConfig"]
    assert [d["PathOnHost"] for d in host["Devices"]] == [
        "/dev/kfd", "/dev/dri/renderD128", "/dev/dri/renderD131"]
    assert {d["CgroupPermissions"] for d in host["Devices"]} == {"rwm"}
    assert host["GroupAdd"] == ["video", "993"]
    assert host["SecurityOpt"] == ["seccomp=unconfined"]
    assert "HSA_OVERRIDE_GFX_VERSION=10.3.0" in rig["request"]["body"]["Env"]
    assert rig["spec"]["gpus"] == {"vendor": "amd", "ids": [0, 3], "all": False,
                                   "shortfall": None}
    five = _dry("-p", "docker-5gpu", "--host-root", str(HOSTS / "docker-5gpu"), "--gpus", "all",
                "--", "true")
    host = five["request"]["body"]["HostConfig"]
    assert host["DeviceRequests"] == [{"Driver": "nvidia", "Count": -1, "DeviceIDs": None,
                                       "Capabilities": [["gpu"]]}]
    env = five["request"]["body"]["Env"]
    assert "NVIDIA_VISIBLE_DEVICES=all" in env
    assert "NVIDIA_DRIVER_CAPABILITIES=compute,utility" in env
    assert host["PidsLimit"] == 7680 and host["ShmSize"] == 8 << 30
    assert {"Name": "memlock", "Soft": -1, "Hard": -1} in host["Ulimits"]


def test_missing_gpus_warn_in_a_dry_run_and_refuse_a_real_run(fake):
    dry = runner.invoke(app, ["run", "-p", "rig-6600", "--runtime", "docker", "--host-root",
                              str(HOSTS / "v2-limited"), "--dry-run", "--json", "--", "true"])
    assert dry.exit_code == 0, dry.output
    lacking = ("profile rig-6600 asks for 12 AMD GPU(s) and this host has 0; use --gpus none "
               "to run on the CPU, or --gpus N for fewer")
    assert f"launcher: warning: {lacking} (a real run refuses)" in dry.stderr
    devices = json.loads(dry.stdout)["request"]["body"]["HostConfig"]["Devices"]
    assert len(devices) == 13  # /dev/kfd and the render nodes of the profile's 12 GPUs
    real = runner.invoke(app, ["run", "-p", "rig-6600", "--runtime", "fake", "--host-root",
                               str(HOSTS / "v2-limited"), "--", "true"])
    assert real.exit_code == 1  # refused for its memory too: every reason at once
    assert real.stderr.startswith("error: refused: 12 processes x 400MiB = 4.7GiB exceed the "
                                  "300MiB memory budget") and real.stderr.count("\n") == 1
    assert f"{lacking[0].upper()}{lacking[1:]}. (see `launcher plan" in real.stderr
    result = runner.invoke(app, ["run", "-p", "docker-5gpu", "--runtime", "fake", "--host-root",
                                 str(HOSTS / "docker-5gpu"), "--gpus", "7", "--", "true"])
    assert result.exit_code == 1
    assert "asks for 7 NVIDIA GPU(s) and this host has 5" in result.stderr
    assert [c for c, _ in fake.calls] == []


def test_run_passes_status_and_env(fake):
    result = runner.invoke(app, ["run", "-p", "gtx1650", "--runtime", "fake", "--gpus", "none",
                                 "--image", "img", "--env", "FOO=a b", "--", "python3", "-c",
                                 "pass"])
    assert result.exit_code == 3
    assert result.stdout == "hello\n"
    assert "fake run, enforced by the kernel: pids recorded by the fake" in \
        result.stderr
    kind, spec = fake.calls[0]
    assert kind == "run"
    assert spec.command == ["python3", "-c", "pass"]
    assert spec.env["FOO"] == "a b"
    assert spec.remove_env == ["OMP_NESTED", "XLA_PYTHON_CLIENT_MEM_FRACTION"]
    assert spec.env["OMP_NUM_THREADS"] == "2"
    assert spec.gpus.vendor == "none" and "NVIDIA_VISIBLE_DEVICES" not in spec.env


def test_refused_plan_does_not_start(fake, tmp_path):
    prof = tmp_path / "tight.yaml"
    prof.write_text("extends: base\nframework: tf\nlimits: {pids: 5}\n")
    result = runner.invoke(app, ["run", "-p", str(prof), "--runtime", "fake", "--", "true"])
    assert result.exit_code == 1
    assert "would exceed the pids limit 5" in result.stderr
    assert fake.calls == []


def test_build_uses_engine_with_context(fake, monkeypatch):
    from launcher.usecases import build as build_usecase

    monkeypatch.setattr(build_usecase, "first_that", lambda capability: fake())  # the builder
    result = runner.invoke(app, ["build", "-p", "runpod", "--base-image", "launcher-base:bookworm",
                                 "--tag", "t/runpod"])
    assert result.exit_code == 0, result.output
    kind, call = fake.calls[1]
    assert kind == "build" and call["tag"] == "t/runpod"
    assert {"Dockerfile", "caps.json", "entrypoint.py", "launcher"} <= set(call["files"])
    assert "Step 1/1 : FROM scratch" in result.stdout


def test_nothing_to_run():
    result = runner.invoke(app, ["run"])
    assert result.exit_code == 1 and "nothing to run" in result.stderr


def test_workload_help_comes_from_its_parser(fake):
    result = runner.invoke(app, ["run", "--runtime", "fake", "stress-jax", "--help"])
    assert result.exit_code == 0, result.output
    assert "usage: stress-jax" in result.stdout and "--max-runs N" in result.stdout
    assert fake.calls == []


def test_an_unknown_option_before_the_command_is_a_usage_error(fake):
    result = runner.invoke(app, ["run", "--runtime", "fake", "--profle", "auto", "--", "true"])
    assert result.exit_code == 2
    assert "No such option '--profle'" in result.stderr and "'--profile'" in result.stderr
    assert fake.calls == []


def test_launcher_options_after_a_workload_name_are_launchers(tmp_path):
    out = _dry("stress-jax", "--phase", "1", "-e", "FOO=1", "--quick", "--name", "w1",
               "--write-profile", str(tmp_path / "p.yaml"), "--num-envs=8")
    assert out["spec"]["command"][3:] == ["--phase", "1", "--quick", "--num-envs=8"]
    assert out["spec"]["env"]["FOO"] == "1"
    assert out["spec"]["name"] == "w1"


def test_after_a_double_dash_every_word_is_the_commands():
    out = _dry("--", "sh", "-c", "true", "--profile", "x", "-e", "A=1", "--dry-run")
    assert out["spec"]["command"] == ["sh", "-c", "true", "--profile", "x", "-e", "A=1",
                                      "--dry-run"]
    assert "A" not in out["spec"]["env"]


def test_no_workload_flag_shadows_a_launcher_option():
    from launcher.cli.run_args import launcher_options
    from launcher.workloads.catalog import registered

    ours = set(launcher_options(app.get_command(None, "run")))
    assert {"--profile", "-p", "--write-profile", "--dry-run", "-e"} <= ours
    for w in registered().values():
        theirs = set(w.parser()._option_string_actions)  # type: ignore[union-attr]
        assert theirs & ours <= {"-h", "--help"}, w.name


def test_a_workload_usage_error_leaves_no_run_folder(fake):
    import os
    from pathlib import Path

    runs = Path(os.environ["LAUNCHER_RUNS_DIR"])
    before = set(runs.iterdir()) if runs.exists() else set()
    result = runner.invoke(app, ["run", "--runtime", "fake", "stress-jax", "--phase", "3"])
    assert result.exit_code == 2
    assert "stress-jax: error: argument --phase: invalid choice" in result.stderr
    assert fake.calls == []
    assert (set(runs.iterdir()) if runs.exists() else set()) == before


def _before_output(*args: str, top: tuple[str, ...] = ()) -> list[str]:
    """What launcher prints before the workload's own first line (the fake's exit sentence)."""
    result = runner.invoke(app, [*top, "run", "--runtime", "fake", "--image", "img",
                                 "--host-root", str(HOSTS / "v2-limited"), *args, "--",
                                 "true"])
    assert result.exit_code == 3, result.output
    lines = result.stderr.splitlines()
    return lines[:next(i for i, x in enumerate(lines) if "exited with its own status" in x)]


def test_one_line_before_the_workload_unless_verbose(fake, tmp_path):
    quiet = _before_output("-p", "base")
    assert len(quiet) == 1, quiet
    assert quiet[0].startswith("launcher: profile base, framework none: threads OMP/MKL/")
    assert "fake run, enforced by the kernel: pids recorded by the fake" in quiet[0]
    loud = _before_output("-p", "base", top=("-v",))  # `launcher -v run`, as `run --verbose`
    assert loud == _before_output("--verbose", "-p", "base")
    assert loud[-1] == quiet[0]
    assert any(x.startswith("launcher: thread values from: ") for x in loud)
    assert any("ulimit nofile: profile limits.nofile (profiles/base.yaml" in x and
               "lowered to this host's hard limit 524288" in x for x in loud)
    mine = tmp_path / "mine.yaml"
    mine.write_text("extends: base\nlimits: {nofile: 2000000}\n")
    asked = _before_output("-p", str(mine))  # the user's own profile asked for more: a warning
    assert len(asked) == 2 and asked[0].startswith("launcher: warning: ulimit nofile: profile "
                                                   f"limits.nofile ({mine}:2)"), asked


def test_the_last_line_says_why_no_plot_was_drawn(fake, monkeypatch, tmp_path):
    import importlib.util
    import shutil

    result = runner.invoke(app, ["run", "--runtime", "fake", "--image", "img", "--", "true"])
    last = result.stderr.splitlines()[-1]
    assert "; no plot: the run has 0 samples and a plot needs 2 (a shorter --interval " \
           "samples more)" in last, last
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real(name, *a))
    from launcher.telemetry.summary import read_series, summarize

    run_dir = tmp_path / "cpu-run"
    shutil.copytree(ROOT / "tests/fixtures/telemetry/cpu-run", run_dir)
    summary = summarize(read_series(run_dir / "telemetry.jsonl"), {
        "run_id": "r1", "profile": "base", "framework": "none", "runtime": "native",
        "command": ["x"], "exit_status": 0, "diagnosis": "done.", "engine": {}})
    assert summary["samples"] >= 2
    (run_dir / "summary.json").write_text(json.dumps(summary))
    plot = runner.invoke(app, ["report", str(run_dir), "--plot"])
    assert plot.exit_code == 1
    assert plot.stderr.strip() == ("error: no telemetry.png: matplotlib is not installed (pip "
                                   "install 'launcher[plot]')")


def test_a_broken_user_workload_file_is_one_line_even_while_routing(monkeypatch, tmp_path):
    (tmp_path / "bad.yaml").write_text("comand: x\n")
    monkeypatch.setenv("LAUNCHER_WORKLOAD_PATH", str(tmp_path))
    result = runner.invoke(app, ["run", "--runtime", "docker", "stress-jax", "--phase", "1",
                                 "--dry-run"])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {tmp_path / 'bad.yaml'}:1: comand: unknown key")


def test_dash_h_is_help_for_run_too():
    result = runner.invoke(app, ["run", "-h"])
    assert result.exit_code == 0 and "--require-limits" in result.stdout


def test_a_workload_of_no_framework_needs_no_numpy(monkeypatch):
    """`framework: none` is the default of a plain Python workload: numpy is capped when it is
    imported, never required (found by a new user's plugin); a framework's own module is."""
    import importlib.util

    from launcher.errors import LauncherError
    from launcher.usecases.run_checks import check_framework

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)  # nothing installed
    check_framework("hello", "none")
    with pytest.raises(LauncherError, match="hello needs torch, which is not installed"):
        check_framework("hello", "torch")
