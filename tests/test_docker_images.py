"""Images built by launcher apply their profile under a bare `docker run` (as on RunPod)."""

from __future__ import annotations

import json

import pytest

from tests.docker_helpers import BASE, launcher

pytestmark = pytest.mark.docker

PROBE = ("import json, os, resource; print(json.dumps({'env': dict(os.environ), "
         "'stack': resource.getrlimit(resource.RLIMIT_STACK)[0]}))")

EXPECT = {
    "gtx1650": {"OMP_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2", "GOMP_STACKSIZE": "512k",
                "OMP_STACKSIZE": "512k", "OMP_MAX_ACTIVE_LEVELS": "1",
                "PYTORCH_ALLOC_CONF": "max_split_size_mb:32", "NVIDIA_VISIBLE_DEVICES": "0"},
    "docker-5gpu": {"OMP_NUM_THREADS": "2", "TF_NUM_INTRAOP_THREADS": "4",
                    "TF_NUM_INTEROP_THREADS": "2", "LAUNCHER_TF_DATA_PARALLELISM": "4",
                    "NVIDIA_VISIBLE_DEVICES": "0,1,2,3,4"},
    "rig-6600": {"OMP_NUM_THREADS": "1", "HSA_OVERRIDE_GFX_VERSION": "10.3.0",
                 "PYTORCH_HIP_ALLOC_CONF": "max_split_size_mb:64"},
    "runpod": {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "XLA_CLIENT_MEM_FRACTION": "0.75"},
}


def _probe(client, image: str, **kw) -> dict:  # type: ignore[no-untyped-def]
    out = client.containers.run(image, ["python3", "-c", PROBE], remove=True, **kw)
    return json.loads(out.decode().strip().splitlines()[-1])


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_seed_profile_image_applies_caps_under_plain_docker_run(client, name):
    tag = f"launcher-test/{name}:none"
    proc = launcher("build", "-p", name, "-f", "none", "--base-image", BASE, "--tag", tag)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"built {tag}" in proc.stdout
    got = _probe(client, tag)
    for key, value in EXPECT[name].items():
        assert got["env"].get(key) == value, key
    assert got["stack"] == 8 * 1024 * 1024  # limits.stack, as the soft limit
    # the supervisor's own variables never reach the workload
    assert not [k for k in got["env"] if k.startswith("LAUNCHER_") and not k.startswith(
        "LAUNCHER_TF_DATA_")]
    # the build measured the image's frameworks' peak threads (numpy here), for the supervisor
    cal = json.loads(client.containers.run(tag, ["cat", "/etc/launcher/calibration.json"],
                                           remove=True))
    assert {(e["framework"], e["cpus"]) for e in cal["entries"]} >= {("none", 1)}


def test_stale_base_env_replaced_explicit_e_wins(client, tmp_path):
    (tmp_path / "Dockerfile").write_text(
        f"FROM {BASE}\nENV OMP_NUM_THREADS=32 OMP_NESTED=TRUE\n")
    client.images.build(path=str(tmp_path), tag="launcher-test/stale-base:1", rm=True)
    tag = "launcher-test/stale:none"
    proc = launcher("build", "-p", "gtx1650", "-f", "none", "--base-image",
                    "launcher-test/stale-base:1", "--tag", tag)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = _probe(client, tag)
    assert got["env"]["OMP_NUM_THREADS"] == "2"  # the base image's 32 did not survive
    assert "OMP_NESTED" not in got["env"]
    got = _probe(client, tag, environment={"OMP_NUM_THREADS": "5"})
    assert got["env"]["OMP_NUM_THREADS"] == "5"  # an explicit -e wins
    logs = client.containers.run(tag, ["true"], remove=True, stderr=True, stdout=False).decode()
    assert "OMP_NUM_THREADS=32 was inherited; set 2" in logs


def test_ca_cert_build_installs_from_pypi_through_the_proxy(client, tmp_path):
    """A pip install inside the build only works with the host's CA (TLS-intercepting proxy)."""
    prof = tmp_path / "withpip.yaml"
    prof.write_text("extends: base\nimage:\n  pip_packages: ['six==1.16.0']\n")
    tag = "launcher-test/withpip:none"
    proc = launcher("build", "-p", str(prof), "-f", "none", "--base-image", BASE, "--tag", tag,
                    "--ca-cert", "/etc/ssl/certs/ca-certificates.crt", timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    out = client.containers.run(tag, ["python3", "-c", "import six; print(six.__version__)"],
                                remove=True).decode()
    assert out.strip().splitlines()[-1] == "1.16.0"


def test_profile_only_change_reuses_lower_layers(client, tmp_path):
    prof = tmp_path / "layers.yaml"
    prof.write_text("extends: base\nthreads: {intra_op: 1}\n")
    tag = "launcher-test/layers:none"
    first = launcher("build", "-p", str(prof), "-f", "none", "--base-image", BASE, "--tag", tag)
    assert first.returncode == 0, first.stderr
    prof.write_text("extends: base\nthreads: {intra_op: 2}\n")
    second = launcher("build", "-p", str(prof), "-f", "none", "--base-image", BASE, "--tag", tag)
    assert second.returncode == 0, second.stderr
    lines = second.stdout.splitlines()
    caps_step = next(i for i, line in enumerate(lines) if "COPY caps.json" in line)
    before = "\n".join(lines[:caps_step])
    assert "Using cache" in before and "Running in" not in before


def test_a_shipped_default_lowered_is_no_warning_at_each_start(client, tmp_path):
    """base.yaml's nofile 1048576 lowered to the daemon's hard limit is a note (shown with
    LAUNCHER_VERBOSE=1), not a warning at every container start; a limit of the user's own
    lowered is still a warning."""
    hard = int(client.containers.run(BASE, ["sh", "-c", "ulimit -Hn"], remove=True))
    if hard >= 1048576:
        pytest.skip("the daemon's containers may have nofile 1048576: nothing is lowered")
    for name, text in (("quiet", "extends: base\n"),
                       ("mine", "extends: base\nlimits:\n  nofile: 1048576\n")):
        prof = tmp_path / f"{name}.yaml"
        prof.write_text(text)
        tag = f"launcher-test/{name}:none"
        built = launcher("build", "-p", str(prof), "-f", "none", "--base-image", BASE,
                         "--tag", tag)
        assert built.returncode == 0, built.stdout[-2000:] + built.stderr
    logs = client.containers.run("launcher-test/quiet:none", ["true"], remove=True,
                                 stderr=True, stdout=False).decode()
    assert "nofile" not in logs, logs
    verbose = client.containers.run("launcher-test/quiet:none", ["true"], remove=True,
                                    stderr=True, stdout=False,
                                    environment={"LAUNCHER_VERBOSE": "1"}).decode()
    assert f"nofile: profile limits.nofile (profiles/base.yaml:14), lowered to this host's " \
           f"hard limit {hard}" in verbose and "warning: nofile" not in verbose, verbose
    mine = client.containers.run("launcher-test/mine:none", ["true"], remove=True,
                                 stderr=True, stdout=False).decode()
    assert "warning: nofile: profile limits.nofile (" in mine and "mine.yaml:3), lowered" in mine
