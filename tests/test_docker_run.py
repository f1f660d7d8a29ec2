"""`launcher run` against the real daemon: the field failure and its cure, the memory
diagnosis, a compose stack, and values that round-trip without executing. What every engine
owes a run (exit status, the pids limit, Ctrl-C, kill -9, pipes, file owners) is
tests/test_engine_behaviour.py's, for Docker too."""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.docker_helpers import (
    BASE,
    HOG,
    compose_bin,
    in_process,
    launcher,
    memory_kill_said,
    profile,
    run_dir_of,
)

pytestmark = pytest.mark.docker

THREADS = ("import numpy, os; a = numpy.ones((256, 256)); a @ a; "
           "print(len(os.listdir('/proc/self/task')))")


def test_one_pid_import_numpy_fails_plain(client):
    c = client.containers.run(BASE, ["python3", "-c", "import numpy"], pids_limit=1,
                              detach=True)
    try:
        assert c.wait()["StatusCode"] != 0
        assert "pthread_create failed" in c.logs(stdout=False, stderr=True).decode()
    finally:
        c.remove(force=True)


def test_same_import_under_launcher_run_fits(tmp_path):
    prof = profile(tmp_path, "fits", "extends: base\nlimits: {pids: 2}\n"
                                     "threads: {intra_op: 1}\n")
    plan = json.loads(in_process("plan", "-p", prof, "--json").stdout)
    assert plan["verdict"]["level"] == "warn"  # 2 of 2 pids: a warning, not a refusal
    proc = launcher("run", "-p", prof, "--image", BASE, "--", "python3", "-c", THREADS)
    assert proc.returncode == 0, proc.stderr
    assert "pthread_create failed" not in proc.stderr
    assert int(proc.stdout.strip()) == plan["estimate"]["per_process"] == 1


def test_memory_hog_is_explained_from_the_oom_counter(tmp_path):
    prof = profile(tmp_path, "hog", "extends: base\nlimits: {memory: 64MiB}\n")
    proc = launcher("run", "-p", prof, "--image", BASE, "--", "python3", "-c", HOG)
    assert proc.returncode == 137, proc.stderr
    memory_kill_said(proc.stderr, "64MiB")


def test_compose_stack_up_inspect_down(client, tmp_path):
    prof = profile(tmp_path, "stack", "extends: base\nlimits:\n  pids: 123\n  memory: 200MiB\n"
                                      "  nofile: 4096\n  stack: 16MiB\n")
    tag = "launcher-test/stack:none"
    built = launcher("build", "-p", prof, "-f", "none", "--base-image", BASE, "--tag", tag)
    assert built.returncode == 0, built.stderr
    out = tmp_path / "render"
    rendered = in_process("render", "-p", prof, "-f", "none", "--tag", tag, "--out", str(out),
                        "--command", "sleep 120")
    assert rendered.returncode == 0, rendered.stderr
    project = f"lt{uuid.uuid4().hex[:8]}"
    compose = [compose_bin(), "-p", project, "-f", str(out / "compose.yaml")]
    try:
        subprocess.run([*compose, "up", "-d"], check=True, capture_output=True, timeout=120)
        (c,) = client.containers.list(filters={"label": f"com.docker.compose.project={project}"})
        host = c.attrs["HostConfig"]
        assert host["PidsLimit"] == 123
        assert host["Memory"] == 200 << 20
        ulimits = {u["Name"]: (u["Soft"], u["Hard"]) for u in host["Ulimits"]}
        assert ulimits["nofile"] == (4096, 4096)
        assert ulimits["stack"] == (16 << 20, -1)
        assert c.exec_run(["sh", "-c", "ulimit -s"]).output.decode().strip() == "16384"
    finally:
        subprocess.run([*compose, "down", "-t", "1"], capture_output=True, timeout=120)
    assert client.containers.list(
        all=True, filters={"label": f"com.docker.compose.project={project}"}) == []


NASTY = "a$HOME b`touch /tmp/pwned1` $(touch /tmp/pwned2) 'q\" \\n\n; touch /tmp/pwned3 #"
ENV_VALUES = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                     max_size=30)
SHOW = ("import os, sys; print(os.environ['X'].encode().hex()); "
        "print(any(os.path.exists(f'/tmp/pwned{i}') for i in (1, 2, 3)))")


def _decode(stdout: str) -> tuple[str, str]:
    hexed, pwned = stdout.rstrip("\n").split("\n")[-2:]
    return bytes.fromhex(hexed).decode(), pwned


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=ENV_VALUES)
def test_env_value_round_trips_through_the_entrypoint(tmp_path_factory, value):
    import yaml

    tmp = tmp_path_factory.mktemp("env")
    prof = profile(tmp, "p", yaml.safe_dump({"extends": "base", "env": {"X": value}}))
    proc = launcher("run", "-p", prof, "--image", BASE, "--", "python3", "-c", SHOW)
    assert proc.returncode == 0, proc.stderr
    assert _decode(proc.stdout) == (value, "False")


def test_nasty_value_through_entrypoint_image_and_compose(client, tmp_path):
    import yaml

    # nofile within this host's hard limit: compose passes ulimits as rendered, unclamped
    prof = profile(tmp_path, "nasty", yaml.safe_dump({"extends": "base", "env": {"X": NASTY},
                                                      "limits": {"nofile": 4096}}))
    proc = launcher("run", "-p", prof, "--image", BASE, "--", "python3", "-c", SHOW)
    assert _decode(proc.stdout) == (NASTY, "False")
    tag = "launcher-test/nasty:none"
    assert launcher("build", "-p", prof, "-f", "none", "--base-image", BASE,
                    "--tag", tag).returncode == 0
    out = client.containers.run(tag, ["python3", "-c", SHOW], remove=True).decode()
    assert _decode(out) == (NASTY, "False")
    rendered = in_process("render", "-p", prof, "-f", "none", "--tag", tag, "--out",
                        str(tmp_path / "r"), "--env", f"X={NASTY}")
    assert rendered.returncode == 0, rendered.stderr
    compose = [compose_bin(), "-p", f"lt{uuid.uuid4().hex[:8]}", "-f",
               str(tmp_path / "r" / "compose.yaml")]
    try:
        run = subprocess.run([*compose, "run", "--rm", "-T", "main", "python3", "-c", SHOW],
                             capture_output=True, text=True, timeout=120)
    finally:  # the project's network too: left, they use up the daemon's address pools
        subprocess.run([*compose, "down", "-t", "1"], capture_output=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert _decode(run.stdout) == (NASTY, "False")


@settings(max_examples=40, deadline=None)
@given(value=ENV_VALUES)
@example(value="0E0").via("found by hypothesis: YAML 1.2 reads it as a float")
@example(value="0o17").via("an octal int in YAML 1.2, a string in 1.1")
@example(value=".inf")
def test_env_value_round_trips_through_compose_config(value, tmp_path_factory):
    """compose-go reads back exactly the value once its `$$` escapes are undone."""
    out = tmp_path_factory.mktemp("c")
    rendered = in_process("render", "-p", "base", "--tag", "t:1", "--out", str(out),
                        "--env", f"X={value}")
    assert rendered.returncode == 0, rendered.stderr
    cfg = subprocess.run([compose_bin(), "-f", str(out / "compose.yaml"), "config", "--format",
                          "json", "--no-interpolate"], capture_output=True, text=True)
    assert cfg.returncode == 0, cfg.stderr
    got = json.loads(cfg.stdout)["services"]["main"]["environment"]["X"]
    assert got.replace("$$", "$") == value


def test_docker_run_has_telemetry_against_the_container_limits(tmp_path):
    prof = profile(tmp_path, "tele", "extends: base\nlimits: {pids: 64, memory: 128MiB}\n")
    code = ("import threading, time\n[threading.Thread(target=time.sleep, args=(3,)).start() "
            "for _ in range(8)]\ntime.sleep(3)\n")
    proc = launcher("run", "--runtime", "docker", "-p", prof, "--image", BASE, "--interval",
                    "0.5", "--", "python3", "-c", code)
    assert proc.returncode == 0, proc.stderr
    run_dir = run_dir_of(proc.stderr)
    rows = [json.loads(x) for x in (run_dir / "telemetry.jsonl").read_text().splitlines()]
    assert rows, "no samples"
    assert rows[0]["pids_max"] == 64 and rows[0]["memory_limit_bytes"] == 128 << 20
    assert max(r["threads"] for r in rows) >= 9  # the supervisor, python and its 8 threads
    assert max(r["pids_current"] or 0 for r in rows) >= 9
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["runtime"] == "docker" and summary["exit_status"] == 0
    assert summary["peaks"]["pids_current"]["kernel_peak"] >= 9  # the container's pids.peak


def test_no_daemon_is_one_clear_line(tmp_path):
    proc = launcher("build", "-p", "base", "--base-image", BASE,
                    env={"DOCKER_HOST": f"unix://{tmp_path}/none.sock"})
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: no Docker daemon answers")
    assert "Traceback" not in proc.stderr
