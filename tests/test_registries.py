"""A new engine, job backend, render target, GPU vendor, framework and workload are each one
module and one entry-point line: tests/plugins/launcher-fakes declares a fake of each, the tests
install it as its own distribution (the `fakes` fixture: pip install --target), and launcher
finds them only through the entry-point groups, as it finds its own built-ins."""

from __future__ import annotations

import json
import threading

import pytest
import yaml
from click.testing import CliRunner

from launcher.cli.main import app

runner = CliRunner()


@pytest.fixture
def xpu(fakes, tmp_path):
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
    assert json.loads(plan.stdout)["verdict"]["level"] == "ok"
    # its own verdict check, said by the plan as launcher's own are
    (host / "sys/class/example-xpu/xpu2").mkdir()
    (host / "sys/class/example-xpu/xpu2/name").write_text("Example XPU 9000\n")
    three = prof.with_name("three.yaml")
    three.write_text("extends: base\ngpu: {vendor: xpu, count: 3}\nframework: torch\n")
    plan = runner.invoke(app, ["plan", "-p", str(three), "--json", "--host-root", str(host)])
    assert json.loads(plan.stdout)["verdict"] == {"level": "refuse", "reasons": [
        "the XPU runtime drives at most 2 devices from one process (asked: 3); run a process "
        "per device."]}
    bad = prof.with_name("bad.yaml")
    bad.write_text("extends: base\ngpu: {vendor: xpx}\n")
    result = runner.invoke(app, ["profiles", "validate", str(bad)])
    assert result.exit_code == 1
    assert "gpu.vendor: must be one of amd, none, nvidia, xpu, auto (got 'xpx')" in result.stderr


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
    dockerfile = (out / "Dockerfile").read_text()
    assert "FROM example/xpu-runtime:1" in dockerfile
    assert "ENV XPU_QUEUE_MODE=single" in dockerfile  # from its own template
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


def test_fake_engine_is_one_module_and_one_line(fake_engine):
    FakeEngine = fake_engine
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
def onnx(fakes):
    return fakes


def test_fake_framework_is_validated_planned_and_rendered(onnx, tmp_path):
    prof = tmp_path / "onnx-box.yaml"
    prof.write_text("extends: base\nframework: onnx\nthreads: {intra_op: 3}\n"
                    "limits: {cpuset: '0'}\n")
    plan = runner.invoke(app, ["plan", "-p", str(prof), "--json"])
    assert plan.exit_code == 0, plan.output
    est = json.loads(plan.stdout)["estimate"]
    # its own model: the pool capped at the one CPU of the cpuset, and its scheduler
    assert est["breakdown"] == {"main": 1, "onnx_scheduler": 1}
    # its version, 1.0, read from its distribution's metadata: the model measured on 1
    assert est["source"] == "launcher_fakes's model (fake, for the registry test)"
    out = tmp_path / "out"
    result = runner.invoke(app, ["render", "-p", str(prof), "--out", str(out)])
    assert result.exit_code == 0, result.output
    # its runtime is its own distribution, which the image carries: nothing to pip install
    assert not (out / "requirements-framework.txt").exists()
    assert (out / "plugins/launcher_fakes/framework.py").is_file()
    assert "onnx = launcher_fakes.framework:FRAMEWORK" in (
        out / "plugins/launcher_fakes-1.0.dist-info/entry_points.txt").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text("extends: base\nallocator: {onnx_arena: 1}\n")  # its own key, checked
    result = runner.invoke(app, ["profiles", "validate", str(bad)])
    assert result.exit_code == 1
    assert "allocator.onnx_arena: must be true or false (got 1)" in result.stderr
    bad.write_text("extends: base\nframework: onyx\n")
    result = runner.invoke(app, ["profiles", "validate", str(bad)])
    assert result.exit_code == 1
    assert "framework: must be one of jax, none, tf, torch, onnx (got 'onyx')" in result.stderr


def test_fake_framework_probe_runs_through_the_registry(onnx, monkeypatch):
    from launcher.workloads import threadprobe

    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    before = threading.active_count()
    threadprobe.first_op("onnx")
    assert threading.active_count() == before + 3


def test_fake_backend_runs_a_job_through_the_ledger(fakes, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("name: inline\ncommand: ['true']\nitems: 10\nchunk_size: 4\noutput: out\n")
    result = runner.invoke(app, ["jobs", "run", str(spec), "-p", "base", "--backend", "inline",
                                 "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["counts"]["done"] == 3
    got = sorted((tmp_path / "out/inline").glob("*.txt"))
    assert [p.read_text() for p in got] == ["0 4\n", "4 8\n", "8 10\n"]
    bad = runner.invoke(app, ["jobs", "run", str(spec), "-p", "base", "--backend", "inlin"])
    assert bad.exit_code == 1 and "--backend must be one of local, ray, slurm, inline" in bad.stderr


def _hello(proc) -> str:  # type: ignore[no-untyped-def]
    """The fake workload's own line: the caps it got and its threads."""
    return next(x for x in proc.stdout.splitlines() if x.startswith("hi onnx:"))


def test_fake_workload_on_the_fake_framework_runs_natively(fakes, tmp_path):
    """The supervisor runs with -S (no site): it still resolves the third party's framework."""
    from tests.conftest import ROOT
    from tests.docker_helpers import launcher

    prof = tmp_path / "onnx-box.yaml"
    prof.write_text("extends: base\nframework: onnx\nthreads: {intra_op: 3}\n"
                    "allocator: {onnx_arena: false}\n")  # its own key
    proc = launcher("run", "-p", str(prof), "--runtime", "native", "hello-onnx", "--say", "hi",
                    env={"PYTHONPATH": f"{fakes}:{ROOT}"}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "framework onnx: threads OMP/MKL/OpenBLAS/TF intra/ONNX intra 3," in proc.stderr
    # its model: the caller, its pool capped at this machine's 2 CPUs (1 worker beside the
    # caller) and its scheduler; the caps the supervisor set reach the workload
    assert "~4 threads (~3 per process + 1 supervisor)" in proc.stderr
    assert _hello(proc) == ("hi onnx: OMP_NUM_THREADS=3 threads=4 "
                           "ONNX_INTRA_OP_THREADS=3 ONNX_ARENA=0")


@pytest.mark.docker
def test_fake_framework_and_workload_run_in_a_real_container(fakes, tmp_path):
    """The image carries the third party's distribution: its supervisor (python -I -S) resolves
    the framework named in caps.json, and the workload module is there to run."""
    from tests.conftest import ROOT
    from tests.docker_helpers import BASE, launcher

    env = {"PYTHONPATH": f"{fakes}:{ROOT}"}
    prof = tmp_path / "onnx-box.yaml"
    prof.write_text("extends: base\nframework: onnx\nthreads: {intra_op: 3}\n"
                    "allocator: {onnx_arena: false}\n")  # its own key
    tag = "launcher-test/onnx-plugin:1"
    built = launcher("build", "-p", str(prof), "-f", "onnx", "--base-image", BASE, "--tag", tag,
                     env=env)
    assert built.returncode == 0, built.stderr
    proc = launcher("run", "-p", str(prof), "--runtime", "docker", "--image", tag,
                    "hello-onnx", "--say", "hi", env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "~4 threads (~3 per process + 1 supervisor)" in proc.stderr
    assert _hello(proc) == ("hi onnx: OMP_NUM_THREADS=3 threads=4 "
                           "ONNX_INTRA_OP_THREADS=3 ONNX_ARENA=0")
    # a bare `docker run` of the image (RunPod): the entrypoint alone resolves the plugin; the
    # workload imports it from the image's launcher folder, as a rendered workload does
    import subprocess

    bare = subprocess.run(["docker", "run", "--rm", "-e", "PYTHONPATH=/opt/launcher", tag,
                           "python3", "-m",
                           "launcher_fakes.workload", "--say", "hi"],
                          capture_output=True, text=True, timeout=120)
    assert bare.returncode == 0, bare.stderr
    assert "framework onnx" in bare.stderr
    assert _hello(bare) == ("hi onnx: OMP_NUM_THREADS=3 threads=4 "
                           "ONNX_INTRA_OP_THREADS=3 ONNX_ARENA=0")


def test_a_source_tree_on_the_path_reads_its_own_entries_from_pyproject():
    """No launcher distribution installed (a checkout on PYTHONPATH, as on the GPU host): the
    built-ins come from pyproject.toml's entry-point tables, the same lines a wheel installs."""
    import subprocess
    import sys

    from launcher import dists
    from tests.conftest import ROOT

    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); from launcher import dists; "
            "print(json.dumps({g: dict(dists.entry_points(g)) for g in sys.argv[2:]}))")
    groups = ["launcher.engines", "launcher.frameworks", "launcher.workloads"]
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(ROOT), *groups],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == {g: {n: list(e) for n, e in dists.entry_points(g).items()}
                               for g in groups}


def test_fake_render_target_renders_a_job(fakes, tmp_path):
    """`--target slurm` is a third party's render target: one module, one entry-point line; the
    job is prepared, planned and measured by launcher as for Kubernetes."""
    spec = tmp_path / "job.yaml"
    spec.write_text("name: arr\ncommand: [python3, w.py, '{start}', '{end}']\nitems: 10\n"
                    "chunk_size: 4\noutput: out\n")
    out = tmp_path / "rendered"
    result = runner.invoke(app, ["jobs", "render", str(spec), "-p", "base", "--target", "slurm",
                                 "--out", str(out)])
    assert result.exit_code == 0, result.output
    script = (out / "arr.sbatch").read_text()
    assert "#SBATCH --array=0-2%" in script  # three chunks of 4, 4 and 2 items
    assert "export LAUNCHER_CHUNK_INDEX=$SLURM_ARRAY_TASK_ID" in script
    assert script.endswith("python3 w.py '{start}' '{end}'\n")
    bad = runner.invoke(app, ["jobs", "render", str(spec), "-p", "base", "--target", "slurn",
                              "--out", str(out)])
    assert bad.exit_code == 1 and "--target must be one of k8s, slurm (got 'slurn')" in bad.stderr


def test_fake_backend_declares_its_own_flag(fakes, tmp_path):
    """`--inline-stamp` is declared by the fake backend alone (launcher_fakes/backend.py):
    `jobs run` takes it, lists it under the backend's name, and refuses it for another backend."""
    spec = tmp_path / "job.yaml"
    spec.write_text("name: inline\ncommand: ['true']\nitems: 4\nchunk_size: 2\noutput: out\n")
    shown = runner.invoke(app, ["jobs", "run", "--help"])
    assert "--inline-stamp TEXT" in shown.stdout and "(inline) A word written" in shown.stdout
    result = runner.invoke(app, ["jobs", "run", str(spec), "-p", "base", "--backend", "inline",
                                 "--inline-stamp", "blue"])
    assert result.exit_code == 0, result.output
    got = sorted((tmp_path / "out/inline").glob("*.txt"))
    assert [p.read_text() for p in got] == ["0 2 blue\n", "2 4 blue\n"]
    assert "--inline-stamp blue" in json.loads(runner.invoke(
        app, ["jobs", "status", str(spec), "--json"]).stdout)["rerun"]
    local = runner.invoke(app, ["jobs", "run", str(spec), "-p", "base", "--inline-stamp", "x"])
    assert local.exit_code == 1
    assert ("--inline-stamp is an option of --backend inline (this job runs on --backend "
            "local)") in local.stderr


def test_fake_workload_declares_a_profile_key_and_a_variable(fakes, tmp_path):
    """`hello.greeting` and HELLO_GREETING are the fake workload's (launcher_fakes/workload.py):
    validated with its file and line, set from the profile before the workload starts."""
    from tests.conftest import ROOT
    from tests.docker_helpers import launcher

    bad = tmp_path / "bad.yaml"
    bad.write_text("extends: base\nframework: onnx\nhello:\n  greetin: hey\n")
    wrong = runner.invoke(app, ["plan", "-p", str(bad)])
    assert wrong.exit_code == 1
    assert f"{bad}:4" in wrong.stderr and "hello.greetin" in wrong.stderr
    assert "did you mean 'greeting'" in wrong.stderr or "hello.greeting" in wrong.stderr
    prof = tmp_path / "hello-box.yaml"
    prof.write_text("extends: base\nframework: onnx\nhello:\n  greeting: hey\n")
    plan = json.loads(runner.invoke(app, ["plan", "-p", str(prof), "--json"]).stdout)
    assert plan["env"]["HELLO_GREETING"]["value"] == "hey"
    assert plan["env"]["HELLO_GREETING"]["source"] == f"profile hello.greeting ({prof}:4)"
    assert plan["verdict"]["level"] == "ok"
    # its own verdict check, on its own key: said by `plan` beside launcher's
    long = tmp_path / "long.yaml"
    long.write_text("extends: base\nframework: onnx\nhello:\n  greeting: " + "o" * 25 + "\n")
    said = runner.invoke(app, ["plan", "-p", str(long)])
    assert "hello.greeting is 25 characters; hello-onnx prints the first 20." in said.stdout
    assert json.loads(runner.invoke(app, ["plan", "-p", str(long), "--json"]).stdout)[
        "verdict"]["level"] == "warn"
    proc = launcher("run", "-p", str(prof), "--runtime", "native", "hello-onnx",
                    env={"PYTHONPATH": f"{fakes}:{ROOT}"}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert any(x.startswith("hey onnx: ") for x in proc.stdout.splitlines()), proc.stdout


def test_a_third_party_s_profile_key_is_listed_by_the_key_table(fakes):
    """The generator of docs/profiles.md's plugin keys (launcher/profiles/key_table.py) lists
    whatever is installed: the fake workload's key here, never in the project's own docs."""
    from launcher.profiles.key_table import plugin_keys_table
    from tests.conftest import ROOT

    table = plugin_keys_table()
    assert "| `hello.greeting` | string | workload hello-onnx | hello-onnx: the word it says " \
           "first |" in table
    assert "`recommended.num_envs`" in table  # launcher's own, beside it
    assert "hello.greeting" not in (ROOT / "docs" / "profiles.md").read_text()


def test_fake_sub_command_is_one_module_and_one_line(fakes):
    """`launcher fakes-hello` is the fakes' own command (launcher_fakes/command.py): listed by
    `launcher --help`, its flags from its request, --json from launcher."""
    listed = runner.invoke(app, ["--help"])
    assert "fakes-hello" in listed.stdout and "Greet someone" in listed.stdout
    said = runner.invoke(app, ["fakes-hello", "--who", "ops", "--times", "2"])
    assert said.exit_code == 0, said.output
    assert said.stdout == "hello ops\nhello ops\n"
    assert "said by launcher-fakes" in said.stderr
    data = runner.invoke(app, ["fakes-hello", "--json"])
    assert json.loads(data.stdout) == {"who": "world", "times": 1}
    bad = runner.invoke(app, ["fakes-hello", "--times", "0"])
    assert bad.exit_code == 2 and "--times" in bad.output


def test_fake_framework_variables_reach_the_calibration_probe(onnx):
    """`launcher calibrate` runs its probe under every registered framework's own variables,
    a third party's too (calibrate names none of them)."""
    from launcher.workloads import calibrate as cal

    assert cal.probe_environment(3)["ONNX_INTRA_OP_THREADS"] == "3"
