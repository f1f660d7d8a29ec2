"""An image's entrypoint under a plain `docker run` (RunPod, Vast: no docker flags): what the
profile asks for and the engine did not set is enforced by the entrypoint where it can, said
to be advisory where it cannot (this host is cgroup v1, its cgroupfs read-only in a
container: advisory, never a budget it does not have), and refused when the profile says
`limits.require`; a pre-flight refusal starts nothing. The cgroup v2 lab
(tests/test_cgroup2_lab.py) shows the same entrypoint enforcing in a private namespace."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docker_helpers import BASE, launcher, profile

pytestmark = pytest.mark.docker

RAN = "import sys; print('workload ran', flush=True)"


def _image(tmp: Path, name: str, limits: str) -> str:
    prof = profile(tmp, name, f"extends: base\nframework: none\nlimits: {limits}\n")
    tag = f"launcher-test/{name}:none"
    proc = launcher("build", "-p", prof, "-f", "none", "--base-image", BASE, "--tag", tag)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return tag


def _run(client, tag: str, **kw) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    c = client.containers.run(tag, ["python3", "-c", RAN], detach=True, **kw)
    try:
        status = c.wait(timeout=120)["StatusCode"]
        return (status, c.logs(stdout=True, stderr=False).decode(),
                c.logs(stdout=False, stderr=True).decode())
    finally:
        c.remove(force=True)


def test_a_pids_limit_the_engine_did_not_set_is_advisory_here_never_a_budget(client, tmp_path):
    tag = _image(tmp_path, "ep-pids64", "{pids: 64}")
    status, out, err = _run(client, tag)
    assert status == 0 and "workload ran" in out
    assert "warning: advisory only: the pids limit (" in err, err
    assert "budget 64 (pids limit 64, advisory: not enforced here)" in err, err
    assert "fix: give the container the limit (docker run --pids-limit" in err, err
    # set by the engine: enforced by the container's own cgroup, nothing advisory
    status, out, err = _run(client, tag, pids_limit=64)
    assert status == 0 and "workload ran" in out
    assert "advisory" not in err, err
    assert "pids 64 (at " in err and "enforced by the container's cgroup" in err, err


def test_limits_require_refuses_and_nothing_runs(client, tmp_path):
    tag = _image(tmp_path, "ep-require", "{pids: 64, require: true}")
    status, out, err = _run(client, tag)
    assert status == 1, err
    assert "workload ran" not in out
    assert "launcher: refused (limits.require): the pids limit (" in err, err
    assert "not started" in err.splitlines()[-1]
    status, out, _ = _run(client, tag, pids_limit=64)  # the engine holds it: it runs
    assert status == 0 and "workload ran" in out


def test_a_preflight_refusal_starts_nothing(client, tmp_path):
    """Report 002's pod under `docker run --pids-limit 2`: the estimate exceeds it; before,
    the entrypoint said "refused" and ran the workload anyway."""
    tag = _image(tmp_path, "ep-refuse", "{pids: auto}")
    status, out, err = _run(client, tag, pids_limit=2)
    assert status == 1, err
    assert "workload ran" not in out
    assert "would exceed the pids.max 2" in err, err
    assert err.splitlines()[-1].startswith("launcher: refused: not started; `limits: {fit: "
                                           "true}` in the profile"), err

