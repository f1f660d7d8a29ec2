"""Every hint is a command that works when pasted (issue 23, item 2): the tests paste them.
The builds here go to the recording engine (a CLI test: what `launcher build` would send);
the TLS test builds for real."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

import pytest
import yaml
from click.testing import CliRunner

from launcher.cli.main import app
from launcher.usecases import build as build_usecase

runner = CliRunner()


def pasted(text: str, first: str) -> list[str]:
    """The words of the `launcher FIRST ...` a line tells the user to run."""
    m = re.search(rf"`(launcher {first} [^`]+)`", text)
    assert m, text
    return shlex.split(m.group(1))[1:]


@pytest.fixture
def recorded(fake_engine, monkeypatch):
    monkeypatch.setattr(build_usecase, "first_that", lambda capability: fake_engine())
    return fake_engine.calls


@pytest.mark.parametrize("args", [
    ["--profile", "runpod", "--workload", "pytorch-phase3"],  # torch, not the profile's jax
    ["--profile", "runpod", "--image", "reg.example/me/x:1", "--base-image",
     "launcher-base:bookworm", "--ca-cert", "/etc/ssl/certs/ca-certificates.crt"],
])
def test_the_build_a_render_names_builds_the_image_its_compose_file_runs(tmp_path, recorded,
                                                                          args):
    out = tmp_path / "out"
    result = runner.invoke(app, ["render", *args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    build = pasted(result.stdout, "build")
    assert runner.invoke(app, build).exit_code == 0
    (_, built), = [c for c in recorded if c[0] == "build"]
    compose = yaml.safe_load((out / "compose.yaml").read_text())
    assert {s["image"] for s in compose["services"].values()} == {built["tag"]}
    assert built["texts"]["Dockerfile"] == (out / "Dockerfile").read_text()
    recipe = json.loads((out / "caps.json").read_text())["recipe"]
    assert json.loads(built["texts"]["caps.json"])["recipe"] == recipe  # what the image resolves
    docker = re.search(r"`(docker build [^`]+)`", result.stdout)
    assert docker and shlex.split(docker.group(1)) == ["docker", "build", "-t", built["tag"],
                                                       str(out)]


def test_the_push_a_runpod_render_names_keeps_its_profile_and_framework(tmp_path, recorded):
    result = runner.invoke(app, ["render", "--profile", "runpod", "--framework", "torch",
                                 "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    words = pasted(result.stderr, "build")
    assert words[words.index("--framework") + 1] == "torch"
    assert words[words.index("--profile") + 1] == "runpod" and "--push" in words


def test_a_gpu_verdict_names_a_plan_option_that_exists():
    # the profile asks for GPUs this host lacks: the verdict says `--gpus none`, which plan takes
    result = runner.invoke(app, ["plan", "--profile", "docker-5gpu"])
    assert "use --gpus none" in result.stdout, result.stdout
    again = runner.invoke(app, ["plan", "--profile", "docker-5gpu", "--gpus", "none"])
    assert again.exit_code == 0, again.output
    assert "GPU(s) and this host shows" not in again.stdout


def test_a_build_behind_a_tls_proxy_names_ca_cert_and_writes_no_terminal_codes(tmp_path):
    """A real build whose pip install meets this machine's TLS-intercepting proxy without its
    CA: the error names --ca-cert, and the log (not a terminal) has no escape codes."""
    from tests.docker_helpers import BASE

    prof = tmp_path / "withpip.yaml"
    prof.write_text("extends: base\nimage:\n  pip_packages: ['six==1.16.0']\n")
    proc = subprocess.run([sys.executable, "-m", "launcher", "build", "-p", str(prof), "-f",
                           "none", "--base-image", BASE, "--image", "launcher-test/nocert:none"],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode == 0:
        pytest.skip("this machine reaches PyPI without a proxy's CA: nothing to name")
    assert "pass its CA with --ca-cert PEM" in proc.stderr, proc.stderr[-2000:]
    assert "\x1b" not in proc.stdout + proc.stderr
    assert "returned a non-zero code" in proc.stderr  # the daemon's own words are kept


def test_examples_come_out_of_the_package_and_replace_nothing(tmp_path):
    listed = runner.invoke(app, ["examples", "--json"])
    got = {e["name"]: e for e in json.loads(listed.stdout)}
    assert set(got) == {"growth", "score-survivors", "base-image.sh"}
    assert got["growth"]["about"].startswith("Loops that grow")  # its README's title
    assert runner.invoke(app, ["examples", "--out", str(tmp_path), "base-image.sh"]).exit_code == 0
    mine = tmp_path / "base-image.sh"
    mine.write_text("my own edits\n")
    again = runner.invoke(app, ["examples", "--out", str(tmp_path)])
    assert again.exit_code == 1 and "exists" in again.stderr
    assert mine.read_text() == "my own edits\n" and not (tmp_path / "score-survivors").exists()
    forced = runner.invoke(app, ["examples", "--out", str(tmp_path), "--force"])
    assert forced.exit_code == 0 and mine.read_text().startswith("#!/usr/bin/env bash")
    assert (tmp_path / "score-survivors" / "job.yaml").is_file()
    unknown = runner.invoke(app, ["examples", "nope"])
    assert unknown.exit_code == 1 and "no example 'nope'" in unknown.stderr


def test_a_user_workloads_help_says_what_it_runs_and_how_to_reach_its_own(tmp_path,
                                                                           monkeypatch):
    folder = tmp_path / "workloads"
    folder.mkdir()
    (folder / "mytrain.yaml").write_text(
        "name: mytrain\ndescription: my training script\n"
        "command: [python3, -c, \"import sys; print('ARGS', sys.argv[1:])\"]\n"
        "args: [--epochs, '3']\n")
    env = {**os.environ, "LAUNCHER_WORKLOAD_PATH": str(folder),
           "LAUNCHER_RUNS_DIR": str(tmp_path / "runs")}
    shown = subprocess.run([sys.executable, "-m", "launcher", "run", "mytrain", "--help"],
                           capture_output=True, text=True, env=env, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("mytrain: my training script\n")
    assert str(folder / "mytrain.yaml") in shown.stdout
    assert not (tmp_path / "runs").exists()  # nothing ran
    words = pasted(shown.stdout, "run")
    ran = subprocess.run([sys.executable, "-m", "launcher", *words, ], capture_output=True,
                         text=True, env=env, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert "ARGS ['--epochs', '3', '--help']" in ran.stdout
