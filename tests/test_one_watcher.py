"""One watcher wherever the workload runs (issue 40): the same leak, started every way the
field starts launcher's images, is foreseen, stopped with exit 75 before its limit where the
profile asks (`growth: {stop: true}`), and leaves a run record that `launcher report` reads
and replays against another profile. The watch is the supervisor's, so no host launcher is
needed: a plain `docker run`, a compose stack, a pod's start with its environment alone.

The leak: examples/growth/leak.py keeping 4 open files a cycle under RLIMIT_NOFILE 256 (an
rlimit: the supervisor sets it itself, with or without the engine's flags), or 3 threads a
cycle under a pids limit of 64 (the issue's own case, where `docker run --pids-limit` sets it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.conftest import ROOT, need
from tests.docker_helpers import (
    BASE,
    LEAK_FILES,
    LEAK_PROFILE,
    assert_chunk_watched,
    assert_watched,
    compose_bin,
    docker_missing,
    in_process,
    launcher,
    leak_chunk_job,
    leak_workdir,
    podman_missing,
    profile,
)
from tests.polling import wait_until, while_running

THREADS = ("--threads", "3", "--cycles", "100", "--seconds", "0.3")  # near cycle 20
IMAGE = "launcher-test/watched:none"


def _run(tmp_path: Path, runtime: str, *extra: str) -> tuple[int, str, Path]:
    work = leak_workdir(tmp_path)
    proc = launcher("run", "--runtime", runtime, "-p", str(work / "watched.yaml"), "--name",
                    "run-w", *extra, "--", "python3", "leak.py", *LEAK_FILES, timeout=300, cwd=work,
                    env={"LAUNCHER_RUNS_DIR": str(work / "runs")})
    return proc.returncode, proc.stdout + proc.stderr, work / "runs" / "run-w"


def test_native(tmp_path):
    rc, out, folder = _run(tmp_path, "native")
    summary = assert_watched(rc, out, folder)
    assert summary["runtime"] == "native" and summary["engine"]["enforced"] is not None


@pytest.mark.docker
def test_launcher_run_in_docker(tmp_path):
    need("Docker and the base image", docker_missing())
    rc, out, folder = _run(tmp_path, "docker", "--image", BASE)
    summary = assert_watched(rc, out, folder)
    assert summary["runtime"] == "docker"


@pytest.mark.docker
def test_launcher_run_in_podman(tmp_path):
    need("Podman and the base image", podman_missing())
    rc, out, folder = _run(tmp_path, "podman", "--image", BASE)
    assert_watched(rc, out, folder)


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> str:
    need("Docker and the base image", docker_missing())
    prof = profile(tmp_path_factory.mktemp("watched"), "watched", LEAK_PROFILE)
    built = launcher("build", "-p", prof, "--base-image", BASE, "--image", IMAGE, timeout=900)
    assert built.returncode == 0, built.stderr[-3000:]
    return IMAGE


def _docker(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


def _one_record(runs: Path) -> Path:
    folders = [p for p in runs.iterdir() if (p / "summary.json").exists()]
    assert len(folders) == 1, list(runs.iterdir())
    return folders[0]


@pytest.mark.docker
def test_plain_docker_run_of_a_built_image(image, tmp_path):
    """The issue's case: the image run as a pod runs it, with the engine's pids limit."""
    work = leak_workdir(tmp_path)
    runs = work / "runs"
    runs.mkdir()
    proc = _docker("run", "--rm", "--pids-limit", "64", "-v", f"{work}:/w:ro", "-v",
                   f"{runs}:/runs", "-e", "LAUNCHER_RUNS_DIR=/runs", image, "python3",
                   "/w/leak.py", *THREADS)
    folder = _one_record(runs)
    summary = assert_watched(proc.returncode, proc.stdout + proc.stderr, folder, "threads")
    assert summary["profile"] == "watched" and summary["recorded_by"] == "supervisor"


@pytest.mark.docker
def test_a_pod_style_start_with_its_environment_only(image, tmp_path):
    """RunPod takes no docker flags: the image, its command and variables (RunPod sets
    RUNPOD_POD_ID in every pod). The profile's nofile is the supervisor's own to set; the
    record goes to the pod's /workspace/runs."""
    work = leak_workdir(tmp_path)
    runs = work / "runs"
    runs.mkdir()
    proc = _docker("run", "--rm", "-e", "LAUNCHER_QUIET=1", "-e", "RUNPOD_POD_ID=lt-pod", "-v",
                   f"{work}:/w:ro", "-v", f"{runs}:/workspace/runs", image, "python3",
                   "/w/leak.py", *LEAK_FILES)
    assert_watched(proc.returncode, proc.stdout + proc.stderr, _one_record(runs))


@pytest.mark.docker
def test_docker_compose_up_of_a_rendered_stack(image, tmp_path):
    """`growth: {stop: true}` said once in the profile reaches the service; the record is
    ./runs/SERVICE beside compose.yaml."""
    work = leak_workdir(tmp_path)
    out = work / "stack"
    rendered = in_process("render", "-p", str(work / "watched.yaml"), "--image", image,
                          "--target", "compose", "--out", str(out), "-v", f"{work}:/w:ro",
                          "--command", " ".join(["python3", "/w/leak.py", *LEAK_FILES]))
    assert rendered.returncode == 0, rendered.stderr
    project = f"lt{uuid.uuid4().hex[:8]}"
    compose = [compose_bin(), "-p", project, "-f", str(out / "compose.yaml")]
    try:
        up = subprocess.run([*compose, "up", "--exit-code-from", "main"], capture_output=True,
                            text=True, timeout=300)
        text = "\n".join(line.split("|", 1)[-1].strip() for line in
                         (up.stdout + up.stderr).splitlines())
        ids = subprocess.run([*compose, "ps", "-a", "-q"], capture_output=True, text=True,
                             timeout=60).stdout.split()
        codes = {_docker("inspect", "--format", "{{.State.ExitCode}}", i).stdout.strip()
                 for i in ids}
        assert len(ids) == 1, ids
        assert_watched(int(codes.pop()), text, out / "runs" / "main")
    finally:
        subprocess.run([*compose, "down", "-t", "1"], capture_output=True, timeout=120)


@pytest.mark.docker
def test_a_kubernetes_containers_closing_sentence_is_its_termination_message(image,
                                                                             tmp_path):
    log = tmp_path / "termination-log"
    log.write_text("")
    proc = _docker("run", "--rm", "-v", f"{log}:/dev/termination-log", image, "python3", "-c",
                   "import sys; sys.exit(3)")
    assert proc.returncode == 3
    assert log.read_text() == "the workload exited with its own status 3."


@pytest.mark.docker
def test_an_image_without_psutil_runs_with_its_caps_and_says_what_it_lacks(tmp_path):
    """A user's own base or an older launcher's copy: the supervisor mounted from a tree with
    no psutil beside it (as `launcher run --image` mounts it, less the watch's need)."""
    need("Docker and the base image", docker_missing())
    proc = _docker("run", "--rm", "-v", f"{ROOT}/launcher:/opt/launcher/launcher:ro", "-v",
                   f"{ROOT}/launcher/supervise/entrypoint.py:/opt/launcher/entrypoint.py:ro",
                   "-e", "LAUNCHER_CAPS=/none.json", "--entrypoint", "python3", BASE, "-I",
                   "-S", "/opt/launcher/entrypoint.py", "sh", "-c", "echo ran")
    # no caps file either: refused with its reason, as before; with launcher's resolution:
    resolved = _docker("run", "--rm", "-e", "LAUNCHER_RESOLVED=1", "-v",
                       f"{ROOT}/launcher:/opt/launcher/launcher:ro", "-v",
                       f"{ROOT}/launcher/supervise/entrypoint.py:/opt/launcher/entrypoint.py:ro",
                       "--entrypoint", "python3", BASE, "-I", "-S",
                       "/opt/launcher/entrypoint.py", "sh", "-c", "echo ran; exit 4")
    assert "cannot apply the caps" in proc.stderr
    assert resolved.returncode == 4 and resolved.stdout == "ran\n"
    assert "growth is not watched and the run record has no samples here: this image lacks " \
           "psutil" in resolved.stderr
    assert resolved.stderr.rstrip().endswith("the workload exited with its own status 4.")


def test_a_local_chunk(tmp_path):
    spec, prof = leak_chunk_job(tmp_path)
    proc = launcher("jobs", "run", str(spec), "-p", str(prof), timeout=300, cwd=tmp_path,
                    env={"PATH": os.environ["PATH"]})
    assert_chunk_watched(proc, tmp_path)


# -- the output through the supervisor -------------------------------------------------------

NUMBERED = ("import sys\nw = sys.stdout.buffer\nfor i in range(200000):\n"
            "    w.write(b'%09d ' % i + b'x' * 90 + b'\\n')\n"
            "sys.stderr.write('done\\n')\n")


def _numbered_ok(data: bytes) -> None:
    lines = data.split(b"\n")
    assert lines.pop() == b"" and len(lines) == 200000, len(lines)
    assert all(line[:9] == b"%09d" % i for i, line in enumerate(lines))  # none lost, in order


def test_nothing_is_lost_and_each_stream_keeps_its_order_natively(tmp_path):
    (tmp_path / "n.py").write_text(NUMBERED)
    with (tmp_path / "out").open("wb") as out:
        proc = subprocess.run([sys.executable, "-m", "launcher", "run", "--runtime", "native",
                               "--", "python3", "n.py"], stdout=out, stderr=subprocess.PIPE,
                              cwd=tmp_path, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(ROOT),
                                   "LAUNCHER_RUNS_DIR": str(tmp_path / "runs")})
    assert proc.returncode == 0, proc.stderr
    _numbered_ok((tmp_path / "out").read_bytes())
    assert b"done\n" in proc.stderr


@pytest.mark.docker
def test_nothing_is_lost_in_docker_and_a_closed_reader_ends_the_workload(tmp_path):
    need("Docker and the base image", docker_missing())
    (tmp_path / "n.py").write_text(NUMBERED)
    env = {"LAUNCHER_RUNS_DIR": str(tmp_path / "runs")}
    proc = launcher("run", "--runtime", "docker", "--image", BASE, "--", "python3", "n.py",
                    cwd=tmp_path, env=env, timeout=180)
    assert proc.returncode == 0, proc.stderr
    _numbered_ok(proc.stdout.encode())
    # `| head -1`: the rest of `yes` is not dropped on the floor for ever; it meets SIGPIPE
    piped = subprocess.run(
        f"{sys.executable} -m launcher run --runtime docker --image {BASE} -- yes | head -1",
        shell=True, capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env})
    assert piped.stdout == "y\n" and "killed by SIGPIPE" in piped.stderr, piped.stderr


def test_a_closed_reader_ends_the_workload_natively(tmp_path):
    piped = subprocess.run(f"{sys.executable} -m launcher run --runtime native -- yes | head -1",
                           shell=True, capture_output=True, text=True, timeout=60,
                           cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT),
                                              "LAUNCHER_RUNS_DIR": str(tmp_path / "runs")})
    assert piped.stdout == "y\n" and "killed by SIGPIPE" in piped.stderr, piped.stderr


def test_a_stalled_reader_stops_neither_the_samples_nor_the_output(tmp_path):
    """The workload writes 8 MB that no one reads until the supervisor has taken five samples
    (2.5 s at least): it waits (as in a pipeline), the supervisor samples on; then every byte
    arrives."""
    record = tmp_path / "rec"
    proc = subprocess.Popen(
        [sys.executable, "-m", "launcher.supervise", "--", "python3", "-c",
         "import sys; sys.stdout.write('x' * 8_000_000); sys.stdout.flush()"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "LAUNCHER_RESOLVED": "1",
             "LAUNCHER_RECORD_DIR": str(record), "LAUNCHER_WATCH": '{"interval": 0.5}'})
    def sampled() -> list[str]:
        telemetry = record / "telemetry.jsonl"
        rows = telemetry.read_text().splitlines() if telemetry.exists() else []
        return rows if len(rows) >= 5 else []

    rows = wait_until(while_running(proc, sampled), timeout=60, what="five samples")
    assert proc.poll() is None and len(rows) >= 5, rows  # sampled while its reader stalled
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and out == b"x" * 8_000_000, err


def _in_a_terminal(command: str, cwd: Path) -> str:
    """`command` run with a terminal as its stdout (util-linux `script`), what it showed."""
    typescript = cwd / "typescript"
    subprocess.run(["script", "-qec", command, str(typescript)], cwd=cwd, timeout=120,
                   env={**os.environ, "PYTHONPATH": str(ROOT),
                        "LAUNCHER_RUNS_DIR": str(cwd / "runs")},
                   stdin=subprocess.DEVNULL, capture_output=True)
    return typescript.read_bytes().decode(errors="replace")


PROBE = "import sys; print(sys.stdout.isatty(), end='\\n'); print('a\\rb')"


def test_a_terminal_stays_a_terminal_natively(tmp_path):
    shown = _in_a_terminal(f"{sys.executable} -m launcher run --runtime native -- python3 -c "
                           f"\"{PROBE}\"", tmp_path)
    # the workload's stdout is a terminal, and its bytes arrive as written: one CR per LF
    assert "True\r\na\rb\r\n" in shown, repr(shown)


@pytest.mark.docker
def test_docker_run_t_of_a_built_image_keeps_the_terminal(image, tmp_path):
    proc = subprocess.run(["docker", "run", "--rm", "-t", image, "python3", "-c", PROBE],
                          capture_output=True, timeout=120)
    # one terminal (docker's): the workload's stdout is one, its bytes as written
    assert proc.returncode == 0 and b"\nTrue\r\na\rb\r\n" in proc.stdout, proc.stdout


def _supervised(shell: str, tmp_path: Path) -> subprocess.CompletedProcess[bytes]:
    """The supervisor around `sh -c 'echo a; echo b >&2; ...'`, from a shell line `shell`
    (where {sup} is the supervisor's command), as launcher starts it natively."""
    sup = f"{sys.executable} -m launcher.supervise --"
    return subprocess.run(["bash", "-c", shell.format(sup=sup)], capture_output=True,
                          timeout=60, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "LAUNCHER_RESOLVED": "1",
                               "LAUNCHER_WATCH": "{}", "LAUNCHER_QUIET": "1"})


def test_stdout_and_stderr_that_are_one_file_keep_their_order(tmp_path):
    lines = "; ".join(f"echo out{i}; echo err{i} >&2" for i in range(50))
    proc = _supervised(f"{{sup}} sh -c '{lines}' 2>&1 | cat", tmp_path)
    want = "".join(f"out{i}\nerr{i}\n" for i in range(50)).encode()
    assert proc.returncode == 0 and proc.stdout == want, proc.stdout[-400:]


@pytest.mark.parametrize("closed", ["0<&-", "2>&-", "1>&-"])
def test_a_closed_standard_stream_is_no_pipe_of_ours(tmp_path, closed):
    """A pipe of the pump must not take a closed fd's number (read as launcher's stdin, or
    written as our stderr): the workload runs as it would without launcher."""
    proc = _supervised(f"exec {closed}; {{sup}} sh -c 'echo a; sleep 0.3; echo b >&2; "
                       f"sleep 0.3; echo c; exit 3'", tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == (b"" if closed == "1>&-" else b"a\nc\n")
    assert proc.stderr.startswith(b"" if closed == "2>&-" else b"b\n")
