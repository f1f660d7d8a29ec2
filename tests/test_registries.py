"""A new GPU vendor and a new engine are each one module and one registry line: a fake of each
is added that way here and used through the CLI, the probe, the renderers and telemetry."""

from __future__ import annotations

import json
import threading

import pytest
import yaml
from typer.testing import CliRunner

from launcher import vendors
from launcher.cli.main import app
from launcher.runtime import engines
from tests.fake_engine import FakeEngine

runner = CliRunner()


@pytest.fixture
def xpu(monkeypatch, tmp_path):
    monkeypatch.setitem(vendors.REGISTRY, "xpu", "tests.fake_vendor")  # the one line
    host = tmp_path / "host"
    for i in range(2):
        (host / f"sys/class/example-xpu/xpu{i}").mkdir(parents=True)
        (host / f"sys/class/example-xpu/xpu{i}/name").write_text("Example XPU 9000\n")
    (host / "etc").mkdir()
    (host / "etc/group").write_text("xpu:x:321:\n")
    prof = tmp_path / "xpu-box.yaml"
    prof.write_text("extends: base\ngpu: {vendor: xpu, count: 2}\nframework: torch\n")
    return host, prof


def test_fake_vendor_is_found_validated_and_planned(xpu):
    host, prof = xpu
    doctor = json.loads(runner.invoke(app, ["doctor", "--json", "--host-root",
                                            str(host)]).stdout)
    assert [(g["vendor"], g["model"]) for g in doctor["host"]["gpus"]] == [
        ("xpu", "Example XPU 9000")] * 2
    assert doctor["host"]["groups"] == {"xpu": 321}
    plan = runner.invoke(app, ["plan", "-p", str(prof), "--json", "--host-root", str(host)])
    assert plan.exit_code == 0, plan.output
    env = json.loads(plan.stdout)["env"]
    assert env["XPU_QUEUE_MODE"]["value"] == "single"
    assert env["XPU_QUEUE_MODE"]["source"].startswith("profile gpu.count (")
    bad = prof.with_name("bad.yaml")
    bad.write_text("extends: base\ngpu: {vendor: xpx}\n")
    result = runner.invoke(app, ["profiles", "validate", str(bad)])
    assert result.exit_code == 1
    assert "gpu.vendor: must be one of nvidia, amd, none, xpu, auto (got 'xpx')" in result.stderr


def test_fake_vendor_reaches_the_container_and_the_stack(xpu, tmp_path):
    host, prof = xpu
    dry = runner.invoke(app, ["run", "-p", str(prof), "--runtime", "docker", "--dry-run",
                              "--json", "--host-root", str(host), "--gpus", "1", "--", "true"])
    assert dry.exit_code == 0, dry.output
    hc = json.loads(dry.stdout)["request"]["body"]["HostConfig"]
    assert [d["PathOnHost"] for d in hc["Devices"]] == ["/dev/xpu0"]
    assert hc["GroupAdd"] == ["321"]
    out = tmp_path / "out"
    result = runner.invoke(app, ["render", "-p", str(prof), "--out", str(out), "--host-root",
                                 str(host)])
    assert result.exit_code == 0, result.output
    services = yaml.safe_load((out / "compose.yaml").read_text())["services"]
    # one process over two GPUs: one service that sees both (a process per GPU: one each)
    assert {n: s["devices"] for n, s in services.items()} == {
        "main": ["/dev/xpu0:/dev/xpu0:rwm", "/dev/xpu1:/dev/xpu1:rwm"]}
    assert "FROM example/xpu-runtime:1" in (out / "Dockerfile").read_text()
    assert (out / "requirements-framework.txt").read_text() == "torch-xpu\n"


def test_fake_vendor_native_visibility_and_telemetry(xpu, monkeypatch):
    host, prof = xpu
    dry = runner.invoke(app, ["run", "-p", str(prof), "--runtime", "native", "--dry-run",
                              "--json", "--host-root", str(host), "--gpus", "1", "--", "true"])
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.stdout)["request"]["env_added"]["XPU_VISIBLE_DEVICES"] == "0"
    from launcher.telemetry.gpus import GpuSampler

    assert GpuSampler(host).sample() == [{"vendor": "xpu", "gpu": 0, "util_percent": 50},
                                         {"vendor": "xpu", "gpu": 1, "util_percent": 50}]


def test_fake_engine_is_one_module_and_one_line(monkeypatch):
    monkeypatch.setitem(engines.REGISTRY, "fake", "tests.fake_engine:FakeEngine")  # the one line
    FakeEngine.calls.clear()
    monkeypatch.setattr(FakeEngine, "status", 0)
    result = runner.invoke(app, ["run", "--runtime", "fake", "--", "python3", "-V"])
    assert result.exit_code == 0, result.output
    assert [kind for kind, _ in FakeEngine.calls] == ["run"]
    dry = runner.invoke(app, ["run", "--runtime", "fake", "--dry-run", "--json", "--", "x"])
    assert json.loads(dry.stdout)["request"] == {"command": ["x"]}
    unknown = runner.invoke(app, ["run", "--runtime", "lxc", "--", "x"])
    assert unknown.exit_code == 1
    assert "--runtime must be one of auto, docker, native, podman, fake (got 'lxc')" in \
        unknown.stderr


@pytest.fixture
def onnx(monkeypatch):
    from launcher import frameworks

    monkeypatch.setitem(frameworks.REGISTRY, "onnx", "tests.fake_framework")  # the one line


def test_fake_framework_is_validated_planned_and_rendered(onnx, tmp_path):
    prof = tmp_path / "onnx-box.yaml"
    prof.write_text("extends: base\nframework: onnx\nthreads: {intra_op: 3}\n"
                    "limits: {cpuset: '0'}\n")
    plan = runner.invoke(app, ["plan", "-p", str(prof), "--json"])
    assert plan.exit_code == 0, plan.output
    est = json.loads(plan.stdout)["estimate"]
    # its own model: the pool capped at the one CPU of the cpuset, and its scheduler
    assert est["breakdown"] == {"main": 1, "onnx_scheduler": 1}
    assert est["source"].startswith("built-in model, the largest of its measured versions")
    out = tmp_path / "out"
    result = runner.invoke(app, ["render", "-p", str(prof), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "requirements-framework.txt").read_text() == "onnxruntime==1.20.0\n"
    bad = tmp_path / "bad.yaml"
    bad.write_text("extends: base\nframework: onyx\n")
    result = runner.invoke(app, ["profiles", "validate", str(bad)])
    assert result.exit_code == 1
    assert "framework: must be one of torch, tf, jax, none, onnx (got 'onyx')" in result.stderr


def test_fake_framework_probe_runs_through_the_registry(onnx, monkeypatch):
    from launcher.workloads import threadprobe

    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    before = threading.active_count()
    threadprobe.first_op("onnx")
    assert threading.active_count() == before + 3


def test_fake_backend_runs_a_job_through_the_ledger(monkeypatch, tmp_path):
    from launcher.jobs import backends

    monkeypatch.setitem(backends.REGISTRY, "inline", "tests.fake_backend:InlineBackend")  # line
    spec = tmp_path / "job.yaml"
    spec.write_text("name: inline\ncommand: ['true']\nitems: 10\nchunk_size: 4\noutput: out\n")
    result = runner.invoke(app, ["jobs", "run", str(spec), "-p", "base", "--backend", "inline",
                                 "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["counts"]["done"] == 3
    got = sorted((tmp_path / "out/inline").glob("*.txt"))
    assert [p.read_text() for p in got] == ["0 4\n", "4 8\n", "8 10\n"]
    bad = runner.invoke(app, ["jobs", "run", str(spec), "-p", "base", "--backend", "inlin"])
    assert bad.exit_code == 1 and "--backend must be one of local, ray, inline" in bad.stderr
