"""launcher/supervise/start.py, the supervisor's first stage, as an image's entrypoint meets
it: a caps.json resolved here (or launcher's caps taken as given), the workload's environment,
and the refusals (their status, their words, the exit file of a run not started). The caps
are resolved in the supervisor's own process (they set its rlimits): each case runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from launcher import contract as c
from launcher.caps.resolve import resolve
from launcher.probe import probe_host
from launcher.profiles import load_profile
from launcher.supervise.start import Prepared, Refused, prepare
from tests.conftest import ROOT, need

PY = sys.executable
SHOW = ("import os; print(os.environ.get('TF_NUM_INTRAOP_THREADS'), "
        "os.environ.get('OMP_NUM_THREADS'), os.environ.get('LAUNCHER_CAPS'))")
DATA = ["prlimit", "--data=100000000", "--stack=8388608"]  # 17 stacks of 8MiB do not fit


def caps_file(tmp_path: Path, name: str, profile: str) -> Path:
    """An image's caps.json, as `launcher build` writes it, of this profile."""
    prof = tmp_path / f"{name}.yaml"
    prof.write_text(profile)
    caps = tmp_path / f"{name}.json"
    recipe = resolve(load_profile(prof), probe_host("/", environ={})).recipe()
    caps.write_text(json.dumps({"recipe": recipe}))
    return caps


def entrypoint(tmp_path: Path, caps: Path, *, pre: list[str] | None = None, code: str = SHOW,
               workload: list[str] | None = None, cwd: Path | None = None,
               **more: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), c.CAPS: str(caps), c.WATCH: "0",
           c.EXIT_FILE: str(tmp_path / "exit.json"), **more}
    argv = [*(pre or []), PY, "-m", "launcher.supervise", "--", *(workload or [PY, "-c", code])]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, cwd=cwd)


def said(stderr: str) -> list[str]:
    return [line[len("launcher: "):] for line in stderr.splitlines()
            if line.startswith("launcher: ")]


def exit_record(tmp_path: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((tmp_path / "exit.json").read_text())


def test_caps_that_cannot_be_read_refuse_with_status_1(tmp_path):
    missing = tmp_path / "none.json"
    heard: list[str] = []
    got = prepare({c.CAPS: str(missing)}, heard.append)
    assert isinstance(got, Refused) and got.status == 1
    assert got.words.startswith(f"error: cannot apply the caps from {missing}: ")
    assert heard == []  # the refusal is the caller's to say
    (tmp_path / "bad.json").write_text("{not json")
    bad = prepare({c.CAPS: str(tmp_path / "bad.json")}, heard.append)
    assert isinstance(bad, Refused) and bad.status == 1 and "bad.json" in bad.words
    proc = entrypoint(tmp_path, missing)
    assert proc.returncode == 1 and proc.stdout == "", proc.stderr
    assert said(proc.stderr) == [got.words]
    assert exit_record(tmp_path) == {"status": 1, "diagnosis": got.words, "started": False}


def test_launchers_caps_are_taken_as_given_whatever_the_caps_file(tmp_path):
    env = {c.RESOLVED: "1", c.CAPS: str(tmp_path / "none.json"), "KEEP": "1"}
    got = prepare(env, lambda _: None)
    assert isinstance(got, Prepared) and got.env == {c.CAPS: str(tmp_path / "none.json"),
                                                     "KEEP": "1"}


def test_caps_resolved_here_set_the_workloads_environment(tmp_path):
    caps = caps_file(tmp_path, "plain", "extends: base\nframework: tf\nthreads: {intra_op: 2}\n")
    proc = entrypoint(tmp_path, caps)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["2", "2", str(caps)]
    lines = said(proc.stderr)
    assert lines[0].startswith("profile plain, framework tf: ")
    assert lines[-1] == exit_record(tmp_path)["diagnosis"]
    assert not any(line.startswith(("refused", "warning", "error")) for line in lines), lines
    quiet = entrypoint(tmp_path, caps, **{c.QUIET: "1"})
    assert quiet.returncode == 0 and said(quiet.stderr) == [], quiet.stderr
    assert quiet.stdout.split() == ["2", "2", str(caps)]


def test_a_refused_verdict_starts_nothing_and_says_how_to_fit(tmp_path):
    caps = caps_file(tmp_path, "big", "extends: base\nframework: tf\nthreads: {intra_op: 16}\n")
    proc = entrypoint(tmp_path, caps, pre=DATA)
    assert proc.returncode == 1 and proc.stdout == "", proc.stderr
    words = "refused: not started; `limits: {fit: true}` in the profile shrinks the pools instead"
    assert said(proc.stderr)[-1] == words
    assert any(line.startswith("refused: ") and "exceed RLIMIT_DATA" in line
               for line in said(proc.stderr)), proc.stderr
    assert exit_record(tmp_path) == {"status": 1, "diagnosis": words, "started": False}


def test_a_refused_verdict_fitted_or_overridden_starts(tmp_path):
    fit = caps_file(tmp_path, "fit", "extends: base\nframework: tf\nthreads: {intra_op: 16}\n"
                                     "limits: {fit: true}\n")
    proc = entrypoint(tmp_path, fit, pre=DATA)
    assert proc.returncode == 0, proc.stderr
    assert any(line.startswith("limits.fit: ") for line in said(proc.stderr)), proc.stderr
    assert exit_record(tmp_path)["started"] is True
    over = caps_file(tmp_path, "over", "extends: base\nframework: tf\nthreads: {intra_op: 16}\n"
                                       "limits: {override: true}\n")
    proc = entrypoint(tmp_path, over, pre=DATA)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["16", "16", str(over)]
    assert any(line.startswith("warning: refused, run anyway (limits.override): ")
               for line in said(proc.stderr)), proc.stderr
    assert not any(line.startswith("refused") for line in said(proc.stderr)), proc.stderr


def test_a_lowered_limit_is_a_warning_when_the_users_and_a_verbose_note_when_shipped(tmp_path):
    show = ["prlimit", "--nofile=4096:8192"]
    code = "import resource; print(*resource.getrlimit(resource.RLIMIT_NOFILE))"
    own = caps_file(tmp_path, "own", "extends: base\nlimits: {nofile: 1048576}\n")
    proc = entrypoint(tmp_path, own, pre=show, code=code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["8192", "8192"]  # the host's hard limit
    warned = [line for line in said(proc.stderr) if line.startswith("warning: nofile: ")]
    assert len(warned) == 1 and "lowered to this host's hard limit 8192" in warned[0], \
        proc.stderr
    shipped = caps_file(tmp_path, "shipped", "extends: base\n")
    plain = entrypoint(tmp_path, shipped, pre=show, code=code)
    assert plain.stdout.split() == ["8192", "8192"]
    assert not any("nofile" in line for line in said(plain.stderr)), plain.stderr
    verbose = entrypoint(tmp_path, shipped, pre=show, code=code, **{c.VERBOSE: "1"})
    notes = [line for line in said(verbose.stderr) if line.startswith("nofile: ")]
    assert len(notes) == 1 and "lowered to this host's hard limit 8192" in notes[0], \
        verbose.stderr


PIDS_V1 = Path("/sys/fs/cgroup/pids")


def test_a_limit_the_container_lacks_is_a_cgroup_the_entrypoint_makes_and_removes(tmp_path):
    need("root and a writable cgroup v1 pids hierarchy (this kind of host)",
         None if os.geteuid() == 0 and os.access(PIDS_V1, os.W_OK) else "not here")
    caps = caps_file(tmp_path, "pids", "extends: base\nlimits: {pids: 64}\n")
    code = "print(open('/proc/self/cgroup').read())"
    for quiet in ("", "1"):
        proc = entrypoint(tmp_path, caps, code=code, **{c.QUIET: quiet})
        assert proc.returncode == 0, proc.stderr
        made = [line.split(":", 2)[2] for line in proc.stdout.splitlines()
                if line.split(":")[1:2] == ["pids"]]
        assert len(made) == 1 and made[0].startswith("/launcher-") and \
            made[0].endswith("-workload"), proc.stdout
        assert not (PIDS_V1 / made[0].lstrip("/")).exists()  # gone with the run
        assert exit_record(tmp_path)["limits_at_start"]["pids_max"] == 64
        lines = said(proc.stderr)
        enforced = "pids 64 (cgroup v1 pids): enforced by a cgroup the entrypoint made"
        assert (enforced in lines) is (not quiet), lines


def test_a_limit_that_cannot_be_enforced_is_advisory_or_refused_where_required():
    """The supervisor as an unprivileged user, who may make no cgroup: the pids limit is
    advisory (said, and the workload runs), or with `limits.require` a refusal."""
    import shutil
    import tempfile

    need("root and setpriv (to start the supervisor as nobody)",
         None if os.geteuid() == 0 and shutil.which("setpriv") else "not here")
    # where nobody may go: not pytest's tmp_path (root's alone), nor a TMPDIR inside one
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        folder = Path(tmp)
        folder.chmod(0o777)
        # launcher's package where nobody may read it (this tree's folders may be root's)
        shutil.copytree(ROOT / "launcher", folder / "tree" / "launcher",
                        symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        for require in (False, True):
            caps = caps_file(folder, f"req{int(require)}", "extends: base\nlimits: {pids: 64"
                             f"{', require: true' if require else ''}}}\n")
            caps.chmod(0o644)
            # (a system's shell: nobody may not reach this Python's own folder)
            proc = entrypoint(folder, caps, pre=drop, workload=["sh", "-c", "echo ran"],
                              cwd=folder, PYTHONPATH=str(folder / "tree"))
            lines = said(proc.stderr)
            if require:
                assert proc.returncode == 1 and proc.stdout == "", proc.stderr
                assert lines[-1].startswith("refused (limits.require): the pids limit (")
                assert lines[-1].endswith(") cannot be enforced here; not started")
                assert exit_record(folder) == {"status": 1, "diagnosis": lines[-1],
                                               "started": False}
            else:
                assert proc.returncode == 0 and proc.stdout == "ran\n", proc.stderr
                assert any(line.startswith("warning: advisory only: the pids limit (")
                           for line in lines), lines


def test_a_refusal_that_no_fit_cures_starts_nothing_and_offers_no_fit(tmp_path):
    caps = caps_file(tmp_path, "tiny", "extends: base\nframework: tf\n"
                                       "limits: {pids: 2, fit: true}\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), c.CAPS: str(caps), c.WATCH: "0",
           c.EXIT_FILE: str(tmp_path / "exit.json")}
    proc = subprocess.Popen([PY, "-m", "launcher.supervise", "--", "sh", "-c", "echo ran"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and out == "", err
    lines = said(err)
    assert lines[-1] == "refused: not started"  # limits.fit is on already: no hint of it
    assert not any(line.startswith("limits.fit: ") for line in lines), lines
    assert exit_record(tmp_path) == {"status": 1, "diagnosis": "refused: not started",
                                     "started": False}
    made = [line for line in lines if line.endswith(": enforced by a cgroup the entrypoint made")]
    if made:  # (root on a v1 host): the cgroup made for it is gone with the refusal
        assert not list(PIDS_V1.glob(f"launcher-{proc.pid}-workload")), made
