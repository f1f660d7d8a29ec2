"""`launcher run` and `launcher build` through the CLI with a fake engine, and the exact
container configuration for the multi-GPU profiles (golden files)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from launcher.cli.main import app
from launcher.runtime.engine import set_engine_factory
from tests.conftest import GOLDEN, HOSTS, ROOT, check_golden
from tests.fake_engine import FakeEngine

runner = CliRunner()


@pytest.fixture
def fake():
    engine = FakeEngine(status=3)
    set_engine_factory(lambda: engine)
    yield engine
    set_engine_factory(None)


def _normal(text: str) -> str:
    return text.replace(str(ROOT), "<repo>")


@pytest.mark.parametrize("name", ["rig-6600", "docker-5gpu"])
def test_dry_run_json_golden(name, update_golden):
    result = runner.invoke(app, ["run", "-p", name, "--host-root", str(HOSTS / name),
                                 "--image", "launcher/test:1", "--dry-run", "--json", "--",
                                 "python3", "train.py"])
    assert result.exit_code == 0, result.output
    check_golden(GOLDEN / "run" / f"{name}.json", _normal(result.stdout), update_golden)


def test_dry_run_contents():
    rig = json.loads(runner.invoke(app, ["run", "-p", "rig-6600", "--host-root",
                                         str(HOSTS / "rig-6600"), "--gpus", "0,3", "--dry-run",
                                         "--json", "--", "true"]).stdout)
    assert rig["devices"] == ["/dev/kfd:/dev/kfd:rwm",
                              "/dev/dri/renderD128:/dev/dri/renderD128:rwm",
                              "/dev/dri/renderD131:/dev/dri/renderD131:rwm"]
    assert rig["group_add"] == ["video", "993"]
    assert rig["security_opt"] == ["seccomp=unconfined"]
    assert rig["environment"]["HSA_OVERRIDE_GFX_VERSION"] == "10.3.0"
    five = json.loads(runner.invoke(app, ["run", "-p", "docker-5gpu", "--host-root",
                                          str(HOSTS / "docker-5gpu"), "--gpus", "all",
                                          "--dry-run", "--json", "--", "true"]).stdout)
    assert five["device_requests"] == [{"Driver": "nvidia", "Capabilities": [["gpu"]],
                                        "Count": -1}]
    assert five["environment"]["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert five["environment"]["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    assert five["pids_limit"] == 7680 and five["shm_size"] == 8 << 30
    assert {"Name": "memlock", "Soft": -1, "Hard": -1} in five["ulimits"]


def test_missing_gpus_refused_naming_gpus_none():
    result = runner.invoke(app, ["run", "-p", "rig-6600", "--host-root",
                                 str(HOSTS / "v2-limited"), "--dry-run", "--", "true"])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "error: profile rig-6600 asks for 12 AMD GPU(s) and this host has 0; use --gpus none "
        "to run on the CPU, or --gpus N for fewer")
    result = runner.invoke(app, ["run", "-p", "docker-5gpu", "--host-root",
                                 str(HOSTS / "docker-5gpu"), "--gpus", "7", "--dry-run", "--",
                                 "true"])
    assert "asks for 7 NVIDIA GPU(s) and this host has 5" in result.stderr


def test_run_passes_status_and_env(fake):
    result = runner.invoke(app, ["run", "-p", "gtx1650", "--gpus", "none", "--image", "img",
                                 "--env", "FOO=a b", "--", "python3", "-c", "pass"])
    assert result.exit_code == 3
    assert result.stdout == "hello\n"
    spec = fake.calls[0][1]
    assert spec["command"] == ["python3", "-c", "pass"]
    assert spec["environment"]["FOO"] == "a b"
    assert spec["environment"]["LAUNCHER_RESOLVED"] == "1"
    assert spec["environment"]["LAUNCHER_REMOVE"] == "OMP_NESTED,XLA_PYTHON_CLIENT_MEM_FRACTION"
    assert spec["environment"]["OMP_NUM_THREADS"] == "2"
    assert "device_requests" not in spec and "NVIDIA_VISIBLE_DEVICES" not in spec["environment"]
    assert spec["entrypoint"] == ["python3", "-I", "-S", "/opt/launcher/entrypoint.py"]


def test_refused_plan_does_not_start(fake, tmp_path):
    prof = tmp_path / "tight.yaml"
    prof.write_text("extends: base\nframework: tf\nlimits: {pids: 5}\n")
    result = runner.invoke(app, ["run", "-p", str(prof), "--image", "img", "--", "true"])
    assert result.exit_code == 1
    assert "would exceed the pids limit 5" in result.stderr
    assert fake.calls == []


def test_build_uses_engine_with_context(fake):
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
