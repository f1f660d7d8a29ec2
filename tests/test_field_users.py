"""What the field reports' users tripped on (issue 32), each held by a test that fails without
its fix: verdicts a script can test, errors before anything else, failure sentences that end
with their fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from launcher.cli.main import app
from tests.conftest import HOSTS
from tests.docker_helpers import profile

runner = CliRunner()


def _profile(tmp_path: Path, text: str, name: str = "p.yaml") -> Path:
    return Path(profile(tmp_path, name.removesuffix(".yaml"), text))


@pytest.mark.parametrize(("pids", "level", "status"), [
    (None, "ok", 0), (12, "refuse", 5)])
def test_plan_detailed_exitcode_is_the_verdict(tmp_path: Path, pids: int | None, level: str,
                                                status: int) -> None:
    limits = f"limits:\n  pids: {pids}\n" if pids else ""
    prof = _profile(tmp_path, f"extends: base\n{limits}")
    args = ["plan", "--profile", str(prof), "--framework", "tf", "--host-root",
            str(HOSTS / "v2-unlimited")]
    plain = runner.invoke(app, args)
    assert plain.exit_code == 0 and f"verdict: {level.upper()}" in plain.stdout
    detailed = runner.invoke(app, [*args, "--detailed-exitcode"])
    assert detailed.exit_code == status, detailed.stdout
    as_json = runner.invoke(app, [*args, "--detailed-exitcode", "--json"])
    assert as_json.exit_code == status


def test_plan_detailed_exitcode_warn_and_mistake(tmp_path: Path) -> None:
    warn = runner.invoke(app, ["plan", "--profile", "gtx1650", "--detailed-exitcode",
                               "--host-root", str(HOSTS / "v2-unlimited")])
    assert "verdict: WARN" in warn.stdout and warn.exit_code == 4
    bad = runner.invoke(app, ["plan", "--profile", "nosuch", "--detailed-exitcode"])
    assert bad.exit_code == 1


def _native_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--runtime auto` as on a host whose Docker answers but lacks the image: native, with
    the warning that says so."""
    from launcher.runtime import engines
    from launcher.usecases import run as run_usecase

    native = engines.get_engine("native")
    monkeypatch.setattr(run_usecase, "choose_engine",
                        lambda *a, **k: (native, "docker has no image IMG: a native run", True))


def test_a_missing_command_fails_before_any_warning_or_start_line(monkeypatch) -> None:
    _native_with_a_warning(monkeypatch)
    missing = runner.invoke(app, ["run", "--", "no-such-command-xyz"])
    assert missing.exit_code == 127
    assert missing.stderr.splitlines() == [
        "error: cannot run 'no-such-command-xyz': neither a workload nor a command on PATH "
        "(`launcher workloads` lists the workloads; a command inside an image needs --image IMG)"]
    relative = runner.invoke(app, ["run", "--", "./no-such-script.sh"])
    assert relative.exit_code == 127 and relative.stderr.count("\n") == 1
    there = runner.invoke(app, ["run", "--dry-run", "--", "true"])
    assert there.exit_code == 0 and "warning: docker has no image IMG" in there.stderr


def test_a_refusal_comes_before_the_engine_warning(monkeypatch) -> None:
    _native_with_a_warning(monkeypatch)
    result = runner.invoke(app, ["run", "-p", "docker-5gpu", "--host-root",
                                 str(HOSTS / "docker-5gpu"), "--gpus", "7", "--", "true"])
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert "asks for 7 NVIDIA GPU(s) and this host has 5" in result.stderr


def test_a_tab_in_yaml_is_named_with_its_line(tmp_path: Path) -> None:
    prof = _profile(tmp_path, "extends: base\nlimits:\n  pids: 12  # ok\nthreads:\n\tomp: 2\n")
    result = runner.invoke(app, ["plan", "--profile", str(prof)])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"error: {prof}:5: invalid YAML: found character that cannot start any token (a tab at "
        f"line 5, column 1: YAML indents with spaces only; replace it with spaces)")


def test_profiles_validate_makes_every_check_a_render_makes(tmp_path: Path) -> None:
    bad = _profile(tmp_path, 'extends: base\nimage:\n  pip_packages: ["numpy && touch x"]\n'
                             '  apt_packages: ["curl", "Bad Name"]\n')
    result = runner.invoke(app, ["profiles", "validate", str(bad)])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"error: {bad}:3: image.pip_packages: not a requirement (PEP 508: a name, extras, a "
        f"version, a marker): Expected semicolon (after name with no version specifier) or end "
        f"(got 'numpy && touch x')",
        f"error: {bad}:4: image.apt_packages: not a Debian package name (got 'Bad Name')"]
    plan = runner.invoke(app, ["plan", "--profile", str(bad)])  # at load: every command
    assert plan.exit_code == 1 and "PEP 508" in plan.stderr
    good = _profile(tmp_path, 'extends: base\nimage:\n  pip_packages: ["numpy>=1.26", '
                              '"torch==2.13.0; python_version > \\"3.9\\"", '
                              '"pkg[x] @ https://example.com/pkg-1-py3-none-any.whl"]\n',
                    "good.yaml")
    assert runner.invoke(app, ["profiles", "validate", str(good)]).exit_code == 0
    amd_tf = _profile(tmp_path, "extends: rig-6600\nframework: tf\n", "amd-tf.yaml")
    refused = runner.invoke(app, ["profiles", "validate", str(amd_tf)])
    assert refused.exit_code == 1
    assert refused.stderr.startswith(f"error: {amd_tf}:2: no tensorflow image for AMD GPUs")
    render = runner.invoke(app, ["render", "-p", str(amd_tf), "--out", str(tmp_path / "r")])
    assert render.exit_code == 1 and "no tensorflow image for AMD GPUs" in render.stderr


def test_doctor_json_names_the_cgroup_of_every_limit_it_read() -> None:
    """A process at its cgroup namespace's root: every limit is read from /sys/fs/cgroup, and
    that folder is named for each controller, cpu included (as Go's runtime and the JDK do)."""
    import json

    host = HOSTS / "v2-namespace-root"
    result = runner.invoke(app, ["doctor", "--json", "--host-root", str(host)])
    cg = json.loads(result.stdout)["host"]["cgroup"]
    top = str(host / "sys/fs/cgroup")
    assert cg["cpu_quota"] == 2.0 and cg["pids_max"] == 77 and cg["memory_limit"] == 300 << 20
    assert cg["dirs"] == {c: top for c in ("pids", "memory", "cpu", "cpuset")}
    assert cg["binding"]["cpu"] == top
    words = runner.invoke(app, ["doctor", "--host-root", str(host)]).stdout
    assert "quota 2 (set at /sys/fs/cgroup)" in words
    assert "max 77 (set at /sys/fs/cgroup), current 3" in words


BOMB = ("import threading, time\n"
        "ts = [threading.Thread(target=time.sleep, args=(1,)) for _ in range(30)]\n"
        "[t.start() for t in ts]\n")


def test_an_informed_override_runs_a_refused_workload_and_says_so(tmp_path: Path) -> None:
    """A real native run under a real pids cgroup: refused, then run with --override; the start
    line, summary.json and the diagnosis say it was overridden and what the plan said."""
    import json
    import sys

    from tests.docker_helpers import launcher, run_dir_of

    prof = _profile(tmp_path, "extends: base\nlimits:\n  pids: 12\n", "p12.yaml")
    args = ["run", "--runtime", "native", "-p", str(prof), "--framework", "tf", "--"]
    refused = launcher(*args, sys.executable, "-c", "print('ran')")
    assert refused.returncode == 1 and "ran" not in refused.stdout
    assert refused.stderr.startswith("error: refused: ~19 threads (~18 per process + 1 "
                                     "supervisor) would exceed the pids limit 12. --override "
                                     "runs it anyway, where you know better (see `launcher plan")
    ran = launcher(*args[:-1], "--override", "--", sys.executable, "-c", BOMB)
    assert ran.returncode == 1, ran.stderr  # the bomb's own RuntimeError: it did run
    reason = "~19 threads (~18 per process + 1 supervisor) would exceed the pids limit 12"
    start = next(x for x in ran.stderr.splitlines() if x.startswith("launcher: profile p12"))
    assert start.endswith("; the plan refused it, run anyway (--override)")
    said = f"the plan refused this run ({reason}), and --override ran it anyway"
    assert f"launcher: overridden: {said}." in ran.stderr
    summary = json.loads((run_dir_of(ran.stderr) / "summary.json").read_text())
    assert summary["override"]["by"] == "--override"
    assert summary["override"]["verdict"] == "refuse"
    assert summary["override"]["reasons"] == [f"{reason}."]  # the plan's, not advice
    p17 = _profile(tmp_path, "extends: base\nlimits:\n  pids: 17\n", "p17.yaml")
    advised = launcher("run", "--runtime", "native", "-p", str(p17), "--framework", "tf",
                       "--override", "--", sys.executable, "-c", "pass")
    assert advised.returncode == 0, advised.stderr  # --fit would have fitted it: not a reason
    assert "--fit" not in advised.stderr.split("overridden:")[-1]
    assert summary["diagnosis"].startswith("the pids limit was reached")
    assert summary["diagnosis"].endswith(f" Overridden: {said}.")


def test_the_profile_key_overrides_but_require_still_refuses(tmp_path: Path) -> None:
    import sys

    from tests.docker_helpers import launcher

    prof = _profile(tmp_path, "extends: base\nlimits:\n  pids: 12\n  override: true\n",
                    "ov.yaml")
    ran = launcher("run", "--runtime", "native", "-p", str(prof), "--framework", "tf", "--",
                   sys.executable, "-c", "print('ran')")
    assert ran.returncode == 0 and ran.stdout == "ran\n", ran.stderr
    assert f"run anyway (limits.override ({prof}:4))" in ran.stderr
    env = {"LAUNCHER_CGROUP_ROOT": str(tmp_path / "no-cgroups")}  # no pids cgroup to be had
    kept = launcher("run", "--runtime", "native", "--require-limits", "-p", str(prof),
                    "--framework", "tf", "--", sys.executable, "-c", "print('ran')", env=env)
    assert kept.returncode == 1 and "ran" not in kept.stdout
    assert kept.stderr.splitlines()[-1].startswith("error: --require-limits: not started: the "
                                                   "pids limit")


def test_a_process_is_budgeted_for_the_gpus_it_sees(tmp_path: Path) -> None:
    """rig-6600 runs a process per GPU: plan (as run) budgets each for one GPU, as jobs plan
    budgets each chunk and render gives each service its own; docker-5gpu's one process sees
    all five."""
    import json

    host = ["--host-root", str(HOSTS / "rig-6600")]
    plan = json.loads(runner.invoke(app, ["plan", "-p", "rig-6600", "--json", *host]).stdout)
    est = plan["estimate"]
    assert est["breakdown"]["torch_autograd_device"] == 1
    assert est["breakdown"]["gpu_event_handler"] == 1
    spec = _profile(tmp_path, "name: t\nitems: 1000\nchunk_size: 100\n"
                              "command: [python3, -c, pass]\n", "job.yaml")
    jobs = runner.invoke(app, ["jobs", "plan", str(spec), "-p", "rig-6600", "--json", *host])
    chunk = json.loads(jobs.stdout)["plan"]["tasks_per_chunk"]
    assert chunk == est["per_process"] + 1  # a chunk is one process and its supervisor
    assert any("budgeted for the 1 GPU it sees of the 12" in n for n in plan["budget"]["notes"])
    render = runner.invoke(app, ["render", "-p", "rig-6600", "--out", str(tmp_path / "r")])
    assert render.exit_code == 0, render.stderr
    compose = (tmp_path / "r" / "compose.yaml").read_text()
    assert compose.count("- /dev/dri/renderD") == 12 and "gpu11:" in compose  # one each
    five = json.loads(runner.invoke(app, ["plan", "-p", "docker-5gpu", "--json", "--host-root",
                                          str(HOSTS / "docker-5gpu")]).stdout)
    assert five["processes"] == 1
    assert not any("budgeted for the" in n for n in five["budget"]["notes"])


def test_oversubscription_is_one_line_and_fit_offers_pools_that_fit(tmp_path: Path) -> None:
    """8 CPUs (the fixture host), 4 processes with a fixed intra_op 4: 16 compute threads."""
    import json

    host = ["--host-root", str(HOSTS / "v2-unlimited")]
    prof = _profile(tmp_path, "extends: base\nthreads:\n  intra_op: 4\n", "i4.yaml")

    def plan(*extra: str) -> dict:
        got = runner.invoke(app, ["plan", "-p", str(prof), "--json", *host, *extra])
        assert got.exit_code == 0, got.stderr
        return json.loads(got.stdout)

    said = plan("--processes", "4")
    assert said["cpus"] == 8
    assert [r for r in said["verdict"]["reasons"] if "oversubscribed" in r] == [
        "4 processes x 4 compute threads = 16 on 8 CPU(s): oversubscribed 2x, so they take "
        "turns; `--fit` sizes each pool 2 (threads.intra_op 2)."]
    assert said["verdict"]["level"] == "warn"
    fitted = plan("--processes", "4", "--fit")
    assert fitted["threads"]["intra_op"] == 2 and fitted["fit"].startswith(
        "--fit: threads.intra_op 2")
    assert not [r for r in fitted["verdict"]["reasons"] if "oversubscribed" in r]
    assert not [r for r in plan("--processes", "2")["verdict"]["reasons"] if "oversub" in r]
    many = json.loads(runner.invoke(app, ["plan", "-p", "base", "--processes", "16", "--json",
                                          *host]).stdout)  # auto pools: one thread each
    assert not [r for r in many["verdict"]["reasons"] if "oversub" in r]  # none smaller
    least = plan("--processes", "16", "--fit")["fit"]  # one thread each is still too many
    assert least.endswith("its CPU pools shrink from 4 to 1 threads, the least a pool can be; "
                          "16 processes still take turns on 8 CPUs (--processes 8 would not)")


GROWING = ("import threading, time\n"
           "kept = []\n"
           "for i in range(7):\n"
           "    kept.append(bytearray(4 << 20))\n"
           "    threading.Thread(target=time.sleep, args=(20,), daemon=True).start()\n"
           "    print('fold', i, flush=True)\n"
           "    time.sleep(0.5)\n")


def test_write_profile_measures_a_users_own_command(tmp_path: Path) -> None:
    """Report 003's user: their own script under a memory limit (the run's own cgroup counts
    the peak), then plan under what it wrote."""
    import sys

    import yaml

    from tests.docker_helpers import launcher

    prof = _profile(tmp_path, "extends: base\nlimits:\n  memory: 400MiB\n", "m400.yaml")
    out = tmp_path / "measured.yaml"
    ran = launcher("run", "--runtime", "native", "-p", str(prof), "--interval", "0.1",
                   "--write-profile", str(out), "--", sys.executable, "-c", GROWING,
                   cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    said = ran.stderr.splitlines()[-1]
    assert said.startswith(f"launcher: wrote {out}: workers.memory ")
    assert "(measured under pids none, memory 400MiB, 1 process(es), profile m400)" in said
    text = out.read_text()
    data = yaml.safe_load(text)
    assert data["extends"] == "m400.yaml" and set(data["workers"]) == {"memory", "threads"}
    assert data["workers"]["threads"] == 8  # main + 7 sleepers; the supervisor left out
    assert "# workers.memory: the run cgroup's memory peak (kernel) " in text
    assert "# workers.threads: the run cgroup's pids.peak (kernel) 9, less the supervisor" in text
    assert "# growth: threads +1 per fold" in text
    mib = int(data["workers"]["memory"].removesuffix("MiB"))
    assert 28 * 1.25 <= mib <= 400  # 7 x 4MiB kept, and the interpreter
    plan = runner.invoke(app, ["plan", "-p", str(out)])
    assert "per process: measured 8" in plan.stdout
    failed = launcher("run", "--runtime", "native", "-p", str(prof), "--write-profile",
                      str(tmp_path / "not.yaml"), "--", sys.executable, "-c", "raise SystemExit(3)",
                      cwd=tmp_path)
    assert failed.returncode == 3 and not (tmp_path / "not.yaml").exists()
    assert "not.yaml not written: the run exited with status 3" in failed.stderr


def test_jobs_plan_detailed_exitcode(tmp_path: Path) -> None:
    spec = _profile(tmp_path, "name: t\nitems: 100\nchunk_size: 10\n"
                              "command: [python3, -c, pass]\n", "job.yaml")
    tight = _profile(tmp_path, "extends: base\nlimits:\n  memory: 100MiB\nworkers:\n"
                               "  memory: 400MiB\n", "tight.yaml")
    args = ["jobs", "plan", str(spec), "--host-root", str(HOSTS / "v2-unlimited")]
    ok = runner.invoke(app, [*args, "-p", "base", "--detailed-exitcode"])
    assert ok.exit_code == 0, ok.output
    refused = runner.invoke(app, [*args, "-p", str(tight), "--detailed-exitcode"])
    assert refused.exit_code == 5, refused.output
    assert refused.stderr.startswith("error: refused: 1 process x 400MiB = 400MiB exceed")
    assert runner.invoke(app, [*args, "-p", str(tight)]).exit_code == 1  # a refusal: an error


def test_an_oom_ends_with_its_fix_and_report_shows_the_kernels_peak(tmp_path: Path) -> None:
    import sys

    from tests.docker_helpers import in_process, launcher, run_dir_of

    prof = _profile(tmp_path, "extends: base\nlimits:\n  memory: 60MiB\n", "m60.yaml")
    grow = "import time\nx = []\nfor i in range(40):\n    x.append(bytearray(10 << 20))\n"
    ran = launcher("run", "--runtime", "native", "-p", str(prof), "--", sys.executable, "-c",
                   grow, cwd=tmp_path)
    assert ran.returncode == 137, ran.stderr
    assert ("rose by 1 (peak 60MiB); raise limits.memory above the peak it needs (`launcher "
            "run --write-profile FILE` measures it), or make it need less (fewer processes, a "
            "smaller batch).") in ran.stderr
    report = in_process("report", str(run_dir_of(ran.stderr))).stdout
    row = next(x for x in report.splitlines() if x.strip().startswith("memory (kernel)"))
    assert row.split()[2:] == ["60MiB", "60MiB", "0B", "100.0%"]


def test_a_measured_profile_is_per_process() -> None:
    """Two processes measured together: each one's memory and threads, the supervisor and the
    workload's own threads left out (the estimate adds them again)."""
    from launcher.caps.load import load_and_resolve
    from launcher.usecases.measured_profile import measured_sections

    r = load_and_resolve("base", processes=2, host_root=HOSTS / "v2-unlimited", clamp=True,
                         extra_threads=1)
    summary = {"run_id": "r1", "memory_peak_kernel": 400 << 20,
               "peaks": {"pids_current": {"kernel_peak": 22}, "rss_bytes": {"peak": 1 << 30}},
               "growth": {}}
    sections, notes = measured_sections(summary, r)
    assert sections["workers"] == {"memory": "250MiB", "threads": 10}  # 200MiB + 25%; 20 / 2
    assert notes[0] == ("workers.memory: the run cgroup's memory peak (kernel) 400MiB / 2 "
                        "processes + 25% = 250MiB.")
    assert notes[1] == ("workers.threads: the run cgroup's pids.peak (kernel) 22, less the "
                        "supervisor and its own 1 over 2 processes = 10.")


def test_the_cpus_fit_is_not_offered_for_a_memory_refusal(tmp_path: Path) -> None:
    import json

    prof = _profile(tmp_path, "extends: base\nlimits:\n  memory: 1GiB\nthreads:\n  intra_op: 4\n"
                              "workers:\n  memory: 900MiB\n", "mem.yaml")
    got = json.loads(runner.invoke(app, ["plan", "-p", str(prof), "--processes", "4", "--json",
                                         "--host-root", str(HOSTS / "v2-unlimited")]).stdout)
    assert got["verdict"]["level"] == "refuse"
    assert not [r for r in got["verdict"]["reasons"] if r.startswith("--fit runs it")]


def test_a_run_of_a_process_per_gpu_profile_warns_that_each_sees_all() -> None:
    result = runner.invoke(app, ["run", "-p", "rig-6600", "--host-root",
                                 str(HOSTS / "rig-6600"), "--dry-run", "--", "true"])
    assert ("warning: each of the 12 processes is budgeted for 1 of the 12 GPUs (the profile "
            "runs a process per GPU); in one run every process sees all 12") in result.stderr
    five = runner.invoke(app, ["run", "-p", "docker-5gpu", "--host-root",
                               str(HOSTS / "docker-5gpu"), "--dry-run", "--", "true"])
    assert "budgeted for 1 of" not in five.stderr
