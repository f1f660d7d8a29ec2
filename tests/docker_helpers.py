"""Helpers for tests that drive the real CLI against the real Docker daemon."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

BASE = os.environ.get("LAUNCHER_TEST_BASE", "launcher-base:bookworm")


def launcher(*args: str, timeout: float = 600, **kw) -> subprocess.CompletedProcess:  # type: ignore[no-untyped-def]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.update(kw.pop("env", {}))
    return subprocess.run([sys.executable, "-m", "launcher", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, **kw)


def profile(tmp: Path, name: str, text: str) -> str:
    path = tmp / f"{name}.yaml"
    path.write_text(text)
    return str(path)


def run_dir_of(stderr: str) -> Path:
    """The run folder `launcher run` names in its last line."""
    import re

    line = next(x for x in stderr.splitlines() if "telemetry and summary in" in x)
    return Path(re.search(r"`launcher report (.+?)`", line).group(1))  # type: ignore[union-attr]


def compose_bin() -> str:
    return str(Path(sys.executable).parent / "docker-compose")


def docker_missing(image: str = BASE) -> str | None:
    """Why `launcher run --runtime docker --image IMAGE` cannot run here, or None."""
    try:
        import docker

        client = docker.from_env(timeout=120)
        client.ping()
    except Exception as exc:  # noqa: BLE001
        return f"no Docker daemon answers: {exc}"
    try:
        client.images.get(image)
    except Exception as exc:  # noqa: BLE001
        return f"Docker has no image {image} (scripts/test.sh builds it): {exc}"
    return None


def podman(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)


def podman_has_dockers(image: str) -> bool:
    """Podman's store has `image` as Docker's has it (where Docker has it at all)."""
    import shutil

    ours = podman("image", "inspect", "--format", "{{.Id}}", image).stdout.strip()
    theirs = shutil.which("docker") and subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", image], capture_output=True,
        text=True).stdout.strip()
    return bool(ours) and (theirs or "").removeprefix("sha256:") in (ours, "")


def podman_missing(image: str = BASE) -> str | None:
    """Why `launcher run --runtime podman --image IMAGE` cannot run here, or None; the image
    is copied from Docker's store first where Podman's lacks it (as scripts/test.sh does)."""
    import shutil

    if shutil.which("podman") is None:
        return "podman is not installed (apt-get install podman)"
    if not podman_has_dockers(image):
        pulled = podman("pull", "-q", f"docker-daemon:{image}")
        if pulled.returncode != 0:
            return f"cannot copy {image} from Docker into Podman: {pulled.stderr.strip()}"
    return None


def in_process(*args: str, cwd: Path | str | None = None,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    """`launcher ARGS` run in this process (the click group through CliRunner), as launcher()
    returns it: for commands whose output is under test and no process boundary is (plan,
    render, doctor, jobs plan/status/render, report, profiles); a run's signals, cgroups and
    exit file need a real process."""
    from click.testing import CliRunner

    from launcher.cli.main import app

    before = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        r = CliRunner().invoke(app, list(args), env=env)
    finally:
        os.chdir(before)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    return subprocess.CompletedProcess(["launcher", *args], r.exit_code, r.stdout, r.stderr)
