"""A user's own code, every day (issue 10): the project folder in the container and files
owned by the caller, dry runs anywhere, nothing left after kill -9, output that tells the
truth, clear mistakes, deployable renders, a build with no registry, a push and the template
that names it. Real daemon, real processes."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, docker_client, need
from tests.docker_helpers import BASE, compose_bin, in_process, launcher, profile, run_dir_of
from tests.polling import wait_until, while_running

SITE = Path(sys.executable).parent.parent / "lib" / f"python{sys.version_info.major}." \
    f"{sys.version_info.minor}" / "site-packages"


def _as_user(uid: int, cwd: Path, *args: str, docker_group: bool = True
             ) -> subprocess.CompletedProcess:
    """launcher as another user (with the docker group), through the system Python: this
    session's venv sits under /root, which others cannot enter."""
    docker_gid = shutil.which("getent") and subprocess.run(
        ["getent", "group", "docker"], capture_output=True, text=True).stdout.split(":")[2]
    python = "/usr/bin/python3"
    need("root, a docker group and /usr/bin/python3",
         None if os.geteuid() == 0 and docker_gid and Path(python).exists() else
         f"uid {os.geteuid()}, docker group {docker_gid or 'none'}, "
         f"{python} {'present' if Path(python).exists() else 'absent'}")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "PYTHONPATH": f"{ROOT}:{SITE}",
           "LAUNCHER_RUNS_DIR": str(cwd / "runs")}
    groups = f"--groups={docker_gid}" if docker_group else "--clear-groups"
    return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}",
                           groups, python, "-m", "launcher", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def open_tmp():
    """A folder another user can reach (pytest's tmp_path sits under a 0700 folder)."""
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="launcher-test-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.docker
def test_project_folder_in_the_container_files_owned_by_the_caller(client, open_tmp):
    proj = open_tmp / "proj"
    proj.mkdir()
    (proj / "train.py").write_text("import os\nopen('written.txt', 'w').write('x')\n"
                                   "print(os.getcwd())\n")
    os.chown(proj, 1000, 1000)
    os.chown(proj / "train.py", 1000, 1000)
    proc = _as_user(1000, proj, "run", "--image", BASE, "--", "python3", "train.py")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(proj)  # mounted at its own path, the working directory
    assert (proj / "written.txt").stat().st_uid == 1000
    asked = _as_user(1000, proj, "run", "--image", BASE, "--user", "0", "--", "python3", "-c",
                     "open('root.txt', 'w').write('x')")
    assert asked.returncode == 0, asked.stderr
    assert (proj / "root.txt").stat().st_uid == 0  # root only when asked
    off = _as_user(1000, proj, "run", "--image", BASE, "--no-mount-cwd", "--", "python3",
                   "train.py")
    assert off.returncode == 2  # no train.py without the mount: python's own status
    assert "No such file or directory" in off.stderr


@pytest.mark.docker
def test_volume_and_workdir_as_docker_has_them(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "in.txt").write_text("hello")
    proc = launcher("run", "--image", BASE, "--no-mount-cwd", "-v", f"{data}:/data:ro", "-w",
                    "/data", "--", "python3", "-c", "import os; print(os.getcwd(), "
                    "open('in.txt').read()); open('/data/x', 'w')", cwd=tmp_path)
    assert proc.stdout.split() == ["/data", "hello"]
    assert "Read-only file system" in proc.stderr and proc.returncode == 1
    bad = launcher("run", "--image", BASE, "-v", "nope", "--", "true")
    assert bad.returncode == 1
    assert bad.stderr.strip() == "error: --volume: expected SRC:DST or SRC:DST:ro (got 'nope')"


@pytest.mark.parametrize(("name", "expect"), [
    ("rig-6600", {"Devices", "GroupAdd", "SecurityOpt"}),
    ("docker-5gpu", {"DeviceRequests"}),
])
def test_dry_run_of_a_gpu_profile_on_this_gpu_less_host(name, expect):
    proc = launcher("run", "-p", name, "--runtime", "docker", "--dry-run", "--json", "--",
                    "python3", "train.py")
    assert proc.returncode == 0, proc.stderr
    short = [x for x in proc.stderr.splitlines()  # beside rig-6600's GPU-per-process warning
             if x.startswith(f"launcher: warning: profile {name} asks for")]
    assert len(short) == 1 and short[0].endswith("(a real run refuses)"), proc.stderr
    body = json.loads(proc.stdout)["request"]["body"]
    assert expect <= set(body["HostConfig"])
    env = dict(e.split("=", 1) for e in body["Env"])
    vendor_var = {"rig-6600": "HSA_OVERRIDE_GFX_VERSION", "docker-5gpu":
                  "NVIDIA_VISIBLE_DEVICES"}[name]
    assert env[vendor_var] == {"rig-6600": "10.3.0", "docker-5gpu": "0,1,2,3,4"}[name]
    real = launcher("run", "-p", name, "--runtime", "native", "--", "true")
    assert real.returncode == 1 and "use --gpus none" in real.stderr


def _processes(pattern: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


@pytest.mark.parametrize("runtime", ["native", pytest.param("docker", marks=pytest.mark.docker)])
def test_kill_9_of_launcher_leaves_nothing_running(runtime, tmp_path):
    if runtime == "docker":
        client = docker_client()
    marker = f"{300 + int(uuid.uuid4().int % 600)}"  # a sleep no one else runs
    name = f"k9-{uuid.uuid4().hex[:8]}"
    prof = profile(tmp_path, "k9", "extends: base\nlimits: {pids: 64}\n")
    p = subprocess.Popen([sys.executable, "-m", "launcher", "run", "--runtime", runtime,
                          "--image", BASE, "--name", name, "-p", prof, "--", "sleep", marker],
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    wait_until(while_running(p, lambda: _processes(f"^sleep {marker}$")), 60,
               what="the workload to start")
    p.send_signal(signal.SIGKILL)  # the workload runs: its supervisor holds the lifeline
    p.wait()

    def still_there() -> tuple[list, list, list]:  # type: ignore[type-arg]
        left = _processes(f"^sleep {marker}$") + _processes(f"entrypoint.py sleep {marker}")
        containers = client.containers.list(all=True, filters={"name": name}) \
            if runtime == "docker" else []
        return left, containers, _run_cgroups(name)

    wait_until(lambda: not any(still_there()), 10, interval=0.2,
               what="the workload, its container and its cgroups to go")


def _run_cgroups(name: str) -> list[Path]:
    from launcher.probe.cgroup import find_chains

    return [d for ch in find_chains(Path("/")).values()
            for d in ch.dirs[0].glob(f"launcher-*-{name}")]


def _dead_pid() -> int:
    """A PID no process has: above the kernel's pid_max (one that ended may be given to
    another process before the test reads it, where PIDs wrap on a busy host)."""
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


@pytest.mark.docker
def test_leftovers_are_reported_and_cleaned(client, tmp_path):
    import docker

    owner = f"{socket.gethostname()}:{_dead_pid()}"
    for attempt in range(5):  # a created container of a gone launcher never started: a run
        try:  # beside this test's may remove it between its create and its start
            c = client.containers.run(BASE, ["sleep", "300"], detach=True,
                                      labels={"launcher.owner": owner, "launcher.run": "lost-run"})
            break
        except docker.errors.NotFound:
            if attempt == 4:
                raise
    try:
        doctor = in_process("doctor", "--json")
        left = json.loads(doctor.stdout)["leftovers"]
        assert {"engine": "docker", "kind": "container", "id": c.id[:12],
                "detail": f"{c.name}, run lost-run, running", "state": "left behind"} in left
        # a run of 2 s: the report, beside it, has that and 2 s more where a busy daemon is
        run = launcher("run", "--runtime", "docker", "--image", BASE, "--", "sleep", "2")
        line = next((x for x in run.stderr.splitlines() if "were killed left" in x), None)
        assert line is not None, run.stderr
        assert f"container {c.id[:12]} ({c.name}, run lost-run, running)" in line
        assert line.endswith("`launcher doctor --clean` removes them")
        clean = launcher("doctor", "--clean")
        assert clean.returncode == 0 and f"docker container {c.id[:12]}" in clean.stdout
        assert client.containers.list(all=True, filters={"id": c.id}) == []
    finally:
        subprocess.run(["docker", "rm", "-f", c.id], capture_output=True)


def test_the_summary_line_shows_the_values_in_force(tmp_path):
    proc = launcher("run", "--runtime", "native", "-e", "OMP_NUM_THREADS=7", "--", sys.executable,
                    "-c", "import os; print(os.environ['OMP_NUM_THREADS'])")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "7"
    line = next(x for x in proc.stderr.splitlines() if x.startswith("launcher: profile auto"))
    assert "OMP 7 (--env (explicit override))" in line


def test_plan_shows_the_ulimits_run_sends_here():
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    plan = json.loads(in_process("plan", "-p", "base", "--json").stdout)
    dry = json.loads(launcher("run", "-p", "base", "--runtime", "docker", "--dry-run", "--json",
                              "--", "true").stdout)
    sent = {u["Name"]: (u["Soft"], u["Hard"]) for u in dry["request"]["body"]["HostConfig"][
        "Ulimits"]}
    nofile = plan["ulimits"]["nofile"]
    assert (nofile["soft"], nofile["hard"]) == sent["nofile"] == (min(1048576, hard),) * 2
    if hard < 1048576:
        assert f"lowered to this host's hard limit {hard}" in nofile["source"]
        text = in_process("plan", "-p", "base").stdout
        assert f"nofile  {hard}/{hard}" in text and "lowered" in text


def _no_repr(text: str) -> None:
    for bad in ("{'", "None", "': ", "PosixPath"):
        assert bad not in text, f"{bad!r} in:\n{text}"


def test_human_output_has_no_python_reprs(tmp_path):
    dry = launcher("run", "-p", "rig-6600", "--runtime", "docker", "--host-root",
                   str(ROOT / "tests/fixtures/hosts/rig-6600"), "--dry-run", "--", "true")
    assert dry.returncode == 0, dry.stderr
    _no_repr(dry.stdout)
    assert "memory 4.7GiB (no swap)" in dry.stdout and "shm 1GiB" in dry.stdout
    assert "stack 8MiB/unlimited" in dry.stdout
    empty = in_process("doctor", "--host-root", str(ROOT / "tests/fixtures/hosts/empty"))
    assert empty.returncode == 0, empty.stderr
    _no_repr(empty.stdout)
    run = launcher("run", "--runtime", "native", "--", sys.executable, "-c", "pass")
    report = in_process("report", str(run_dir_of(run.stderr)))
    _no_repr(report.stdout)
    assert "threads: peak" in report.stdout and "estimated by the plan" in report.stdout


def test_mistakes_are_one_clear_line(tmp_path):
    runs = Path(os.environ["LAUNCHER_RUNS_DIR"])
    before = set(runs.iterdir())
    typo = launcher("run", "stress-jx")
    assert typo.returncode == 1
    assert typo.stderr.strip() == ("error: 'stress-jx' is neither a workload nor a command on "
                                   "PATH; did you mean the workload 'stress-jax'? (`launcher "
                                   "workloads` lists them)")
    missing = launcher("run", "--runtime", "native", "--", "no-such-command-xyz")
    assert missing.returncode == 127  # before any warning or start line: one line
    assert missing.stderr.strip() == (
        "error: cannot run 'no-such-command-xyz': neither a workload nor a command on PATH "
        "(`launcher workloads` lists the workloads; a command inside an image needs --image IMG)")
    assert set(runs.iterdir()) == before  # no run folder for what never started
    plna = launcher("plna")
    assert plna.returncode == 2 and plna.stderr.count("Did you mean 'plan'?") == 1
    gpus = launcher("run", "-p", "docker-5gpu", "--gpus", "abc", "--dry-run", "--", "true")
    assert gpus.returncode == 1
    assert gpus.stderr.strip() == ("error: --gpus must be all, none, a count such as 2, or "
                                   "device IDs such as 0,2 (got 'abc')")
    root = in_process("doctor", "--host-root", str(tmp_path / "nope"))
    assert root.returncode == 1
    assert root.stderr.strip() == f"error: {tmp_path / 'nope'}: no such folder to read host " \
                                  f"facts from"
    bad = tmp_path / "bad.yaml"
    bad.write_text("extends: base\nlimits:\n  pids: 0\n  nofle: 5\nthreads: {intra_op: x}\n")
    result = in_process("plan", "-p", str(bad))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        f"error: {bad}:3: limits.pids: must be at least 1 (got 0)",
        f"error: {bad}:4: limits.nofle: unknown key; did you mean 'limits.nofile'?",
        f"error: {bad}:5: threads.intra_op: must be a whole number or `auto` (got 'x')"]


@pytest.mark.docker
def test_a_command_missing_from_the_image_leaves_no_run_folder():
    runs = Path(os.environ["LAUNCHER_RUNS_DIR"])
    before = set(runs.iterdir())
    proc = launcher("run", "--image", BASE, "--", "no-such-command-xyz")
    assert proc.returncode == 127
    assert "cannot run 'no-such-command-xyz'" in proc.stderr
    assert set(runs.iterdir()) == before


def test_version():
    proc = launcher("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == "launcher 0.1.0"


@pytest.mark.docker
def test_a_rendered_cpu_stack_runs_its_command_in_every_service(client, tmp_path):
    prof = profile(tmp_path, "stackrun", "extends: base\nlimits: {pids: 64, nofile: 4096}\n"
                                         "threads: {intra_op: 1}\n")
    tag = "launcher-test/stackrun:none"
    assert launcher("build", "-p", prof, "--base-image", BASE, "--image", tag).returncode == 0
    out = tmp_path / "stack"
    shared = tmp_path / "shared"
    shared.mkdir()
    rendered = in_process("render", "-p", prof, "--image", tag, "--out", str(out), "-v",
                        f"{shared}:/shared", "--command",
                        "sh -c 'echo done > /shared/$(hostname); nproc > /shared/nproc'")
    assert rendered.returncode == 0, rendered.stderr
    services = yaml.safe_load((out / "compose.yaml").read_text())["services"]
    assert all(s["cpus"] == 1.0 for s in services.values())  # a CPU limit: threads.intra_op
    project = f"lt{uuid.uuid4().hex[:8]}"
    compose = [compose_bin(), "-p", project, "-f", str(out / "compose.yaml")]
    try:
        up = subprocess.run([*compose, "up", "--abort-on-container-exit"], capture_output=True,
                            text=True, timeout=180)
        assert up.returncode == 0, up.stderr[-2000:]
        written = [p for p in shared.iterdir() if p.name != "nproc"]
        assert len(written) == len(services) and all(p.read_text() == "done\n"
                                                      for p in written)
    finally:
        subprocess.run([*compose, "down", "-t", "1"], capture_output=True, timeout=120)
    assert client.containers.list(
        all=True, filters={"label": f"com.docker.compose.project={project}"}) == []


def test_runpod_template_names_the_image_and_opens_ports_only_when_asked(tmp_path):
    out = tmp_path / "r"
    proc = in_process("render", "-p", "runpod", "--image", "registry.example.com/me/jax:1",
                    "--workload", "stress-jax --phase 1", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    pod = json.loads((out / "runpod.json").read_text())
    assert pod["imageName"] == "registry.example.com/me/jax:1"
    assert pod["ports"] == ""
    assert pod["dockerArgs"] == "python3 -m launcher.workloads.stress_jax --phase 1"
    local = in_process("render", "-p", "runpod", "--out", str(tmp_path / "l"), "--port",
                     "8888/http")
    assert "a local tag RunPod cannot pull" in local.stderr
    assert json.loads((tmp_path / "l" / "runpod.json").read_text())["ports"] == "8888/http"


@pytest.fixture
def registry(tmp_path):
    """A real registry (Debian's docker-registry) on a loopback port the daemon trusts."""
    binary = shutil.which("docker-registry")
    need("docker-registry", None if binary else "not installed (scripts/test.sh installs it)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = tmp_path / "registry.yml"
    cfg.write_text(yaml.safe_dump({
        "version": 0.1, "storage": {"filesystem": {"rootdirectory": str(tmp_path / "reg")}},
        "http": {"addr": f"127.0.0.1:{port}"}, "log": {"level": "error"}}))
    proc = subprocess.Popen([binary, "serve", str(cfg)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    def answers() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    wait_until(answers, 30, interval=0.1, what="the registry to answer")
    yield f"127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.mark.docker
def test_build_push_and_the_template_that_names_it(client, registry, tmp_path):
    image = f"{registry}/launcher-test/runpod:{uuid.uuid4().hex[:6]}"
    built = launcher("build", "-p", "runpod", "-f", "none", "--base-image", BASE, "--image",
                     image, "--push")
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr
    assert f"pushed {image}" in built.stdout
    client.images.remove(image, force=True)
    client.images.pull(image)  # it is really in the registry
    out = tmp_path / "r"
    assert in_process("render", "-p", "runpod", "--image", image, "--out",
                    str(out)).returncode == 0
    assert json.loads((out / "runpod.json").read_text())["imageName"] == image
    client.images.remove(image, force=True)


@pytest.mark.docker
def test_a_build_with_no_registry_says_how_to_use_a_local_base(tmp_path):
    """Its hint works when pasted, from any folder: the recipe comes out of the package, and
    the build it names then succeeds."""
    import re
    import shlex

    docker_client()
    proc = launcher("build", "-p", "base")  # python:3.11-slim-bookworm: no registry here
    if proc.returncode == 0:
        pytest.skip("a registry is reachable from this host")
    assert proc.returncode == 1
    assert proc.stderr.startswith(
        "error: cannot pull the base image python:3.11-slim-bookworm (no registry reachable?): "
        "build a local one (debootstrap, then docker import) with `launcher examples --out . "
        "base-image.sh && bash base-image.sh launcher-base:bookworm`, then `launcher build "
        "--profile base --framework none --base-image launcher-base:bookworm"), proc.stderr
    recipe, build = re.findall(r"`([^`]+)`", proc.stderr)
    steps = [shlex.split(step) for step in recipe.split(" && ")]
    assert launcher(*steps[0][1:], cwd=tmp_path).returncode == 0
    recipe_file = (tmp_path / "base-image.sh").read_bytes()
    assert recipe_file == (ROOT / "scripts/base-image.sh").read_bytes()
    done = subprocess.run(steps[1], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0 and "launcher-base:bookworm" in done.stdout, done.stderr
    built = launcher(*shlex.split(build)[1:])
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr


@pytest.mark.docker
def test_outside_the_docker_group_the_socket_is_named_not_a_stopped_daemon(client, open_tmp):
    os.chown(open_tmp, 1000, 1000)
    proc = _as_user(1000, open_tmp, "run", "--runtime", "docker", "--image", BASE, "--",
                    "true", docker_group=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: permission denied on the Docker socket "), proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    assert "docker group" in proc.stderr and "--runtime native" in proc.stderr
    assert "start dockerd" not in proc.stderr
    auto = _as_user(1000, open_tmp, "run", "--image", BASE, "--", "true", docker_group=False)
    assert auto.returncode == 0, auto.stderr
    assert auto.stderr.startswith(f"launcher: warning: --image {BASE} is not used: ")
    assert "(permission denied on the Docker socket " in auto.stderr.splitlines()[0]


@pytest.mark.docker
def test_a_missing_image_is_pulled_with_progress(client, registry):
    ref = f"{registry}/launcher-test/pull:{uuid.uuid4().hex[:6]}"
    client.images.get(BASE).tag(ref)
    try:
        for _ in client.api.push(ref, stream=True, decode=True):
            pass
        client.images.remove(ref)  # the tag only: BASE keeps the image
        proc = launcher("run", "--image", ref, "--", "true")
        assert proc.returncode == 0, proc.stderr
        lines = proc.stderr.splitlines()
        assert lines[0].startswith(f"launcher: pulling {ref}")
        assert any(x.startswith(f"launcher: pulled {ref} (") for x in lines), lines
        assert client.images.get(ref)
    finally:
        with contextlib.suppress(Exception):
            client.images.remove(ref)


@pytest.mark.docker
def test_a_failed_pull_is_one_line_naming_the_image(client):
    runs = Path(os.environ["LAUNCHER_RUNS_DIR"])
    before = set(runs.iterdir())
    ref = "127.0.0.1:1/launcher-test/none:x"  # no registry listens there
    proc = launcher("run", "--image", ref, "--", "true")
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"error: cannot pull {ref}: "), proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    assert set(runs.iterdir()) == before


@pytest.mark.docker
def test_auto_with_docker_up_but_no_image_says_so_and_runs_natively(tmp_path, monkeypatch):
    """The README's command 1 on a host whose Docker answers but has not built the image: the
    native run is no surprise (a warning, printed without --verbose); with no engine
    answering it stays a note."""
    docker_client()
    monkeypatch.chdir(tmp_path)
    prof = tmp_path / f"never-built-{uuid.uuid4().hex[:6]}.yaml"
    prof.write_text("extends: base\n")
    run = in_process("run", "-p", str(prof), "--", "true")
    assert run.returncode == 0, run.stderr
    assert (f"launcher: warning: no image launcher/{prof.stem}:none for docker (build one with "
            f"`launcher build`); using the native runtime") in run.stderr
    quiet = in_process("run", "-p", str(prof), "--", "true",
                       env={"DOCKER_HOST": f"unix://{tmp_path}/no.sock"})
    assert quiet.returncode == 0 and "warning" not in quiet.stderr, quiet.stderr
