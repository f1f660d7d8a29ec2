"""`launcher doctor --json` inside a real container with a pids limit, a CPU quota and a
memory limit, started through the docker SDK against the real daemon."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.docker
BASE = "launcher-base:bookworm"


@pytest.fixture(scope="module")
def cli_deps(tmp_path_factory):
    """The CLI's pure-Python dependencies, as pyproject.toml pins them, for the container's
    Python (--ignore-installed: this venv's own copies do not count for the target)."""
    target = tmp_path_factory.mktemp("deps")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-compile",
                    "--ignore-installed", "--target", str(target),
                    "click>=8.2", "pyyaml"], check=True)
    return target


def test_doctor_reports_the_container_limits(client, cli_deps):
    out = client.containers.run(
        BASE, ["python3", "-m", "launcher", "doctor", "--json"],
        pids_limit=77, nano_cpus=1_500_000_000, mem_limit="300m",
        volumes={str(ROOT): {"bind": "/src", "mode": "ro"},
                 str(cli_deps): {"bind": "/deps", "mode": "ro"}},
        environment={"PYTHONPATH": "/src:/deps"}, remove=True, stderr=True,
    )
    data = json.loads(out)
    cg = data["host"]["cgroup"]
    assert cg["pids_max"] == 77
    assert cg["cpu_quota"] == 1.5
    assert data["host"]["effective_cpus"] == 1  # 1.5 rounded down
    assert cg["memory_limit"] == 314572800
    assert data["first_limit"]["binding"].startswith("pids.max 77")
