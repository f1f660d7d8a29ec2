"""What the field reports' users tripped on (issue 32), each held by a test that fails without
its fix: verdicts a script can test, errors before anything else, failure sentences that end
with their fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from launcher.cli.main import app
from tests.conftest import HOSTS

runner = CliRunner()


def _profile(tmp_path: Path, text: str, name: str = "p.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


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
