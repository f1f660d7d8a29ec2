"""A normal install works without the source tree: a wheel built from the project's files,
installed into a fresh venv (not editable), and the same package installed with
`pip install --target DIR` and run inside a plain container with PYTHONPATH=DIR."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.docker_helpers import BASE

SHIPPED = ["auto", "base", "docker-5gpu", "gtx1650", "rig-6600", "runpod"]
SEEDS = ["gtx1650", "docker-5gpu", "rig-6600", "runpod"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Built from a copy of the files git knows (as a clean clone has them)."""
    src = tmp_path_factory.mktemp("src")
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                           cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, (f.decode() for f in files)):
        source, dest = ROOT / name, src / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree
        dest.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            dest.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, dest)
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(src), "-w",
                    str(dist)], check=True, capture_output=True, timeout=600)
    (whl,) = dist.glob("launcher-*.whl")
    return whl


def test_wheel_holds_the_shipped_data(wheel):
    import zipfile

    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"launcher/_shipped/profiles/{p}.yaml" for p in SHIPPED} <= names
    assert {"launcher/_shipped/images/Dockerfile.base", "launcher/_shipped/images/Dockerfile.cuda",
            "launcher/_shipped/images/Dockerfile.rocm",
            "launcher/_shipped/images/Dockerfile.cpu"} <= names
    assert {"launcher/_shipped/base-image.sh",
            "launcher/_shipped/examples/score-survivors/job.yaml",
            "launcher/_shipped/examples/score-survivors/worker.py",
            "launcher/_shipped/examples/score-survivors/requirements.txt"} <= names


def test_wheel_in_a_fresh_venv(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin/pip"), "install", "-q", str(wheel)], check=True,
                   capture_output=True, timeout=900)
    work = tmp_path / "elsewhere"  # not the source tree
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def launcher(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(venv / "bin/launcher"), *args], cwd=work, env=env,
                              capture_output=True, text=True, timeout=300)

    listed = launcher("profiles", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [p["name"] for p in json.loads(listed.stdout)] == SHIPPED
    where = subprocess.run([str(venv / "bin/python"), "-c", "import launcher; print("
                            "launcher.__file__)"], capture_output=True, text=True, env=env,
                           cwd=work).stdout
    assert where.startswith(str(venv))
    for name in SEEDS:
        out = work / name
        result = launcher("render", "-p", name, "--out", str(out))
        assert result.returncode == 0, result.stderr
        assert (out / "Dockerfile").read_text().startswith("# Rendered by launcher")
        assert (out / "compose.yaml").is_file() and (out / "runpod.json").is_file()
    doctor = launcher("doctor")
    assert doctor.returncode == 0, doctor.stderr
    # the docs' jobs walk-through and the build's hint need the examples and the recipe
    wrote = launcher("examples", "--out", "ex")
    assert wrote.returncode == 0, wrote.stderr
    for name in ("score-survivors/job.yaml", "score-survivors/worker.py", "base-image.sh"):
        assert (work / "ex" / name).read_bytes() == (ROOT / "examples" / name if "/" in name
                                                     else ROOT / "scripts" / name).read_bytes()
    planned = launcher("jobs", "plan", "ex/score-survivors/job.yaml")
    assert planned.returncode == 0, planned.stderr


@pytest.mark.docker
def test_target_install_in_a_plain_container(client, wheel, tmp_path):
    target = tmp_path / "target"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(target),
                    str(wheel)], check=True, capture_output=True, timeout=900)
    script = ("set -e; python3 -m launcher profiles list --json > /out/list.json; "
              + "; ".join(f"python3 -m launcher render -p {n} --out /out/{n} > /dev/null"
                          for n in SEEDS))
    out = tmp_path / "out"
    out.mkdir()
    client.containers.run(BASE, ["sh", "-c", script], remove=True,
                          user=f"{os.getuid()}:{os.getgid()}",
                          environment={"PYTHONPATH": "/pkg", "HOME": "/tmp"},
                          volumes={str(target): {"bind": "/pkg", "mode": "ro"},
                                   str(out): {"bind": "/out", "mode": "rw"}})
    assert [p["name"] for p in json.loads((out / "list.json").read_text())] == SHIPPED
    for name in SEEDS:
        assert (out / name / "Dockerfile").read_text().startswith("# Rendered by launcher")
        assert (out / name / "compose.yaml").is_file()
