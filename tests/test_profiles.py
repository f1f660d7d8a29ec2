"""Shipped profiles load; every broken profile gives one line naming file, line and key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.errors import ProfileError
from launcher.profiles import available, load_profile
from launcher.profiles.schema import walk_schema
from tests.conftest import FIXTURES, ROOT

BROKEN = FIXTURES / "broken"

# file -> (line, the part of the message that names the key and what is wrong)
CORPUS = {
    "bad-yaml.yaml": (4, "invalid YAML"),
    "wrong-type.yaml": (3, "limits.pids: must be a whole number or `auto` or `unlimited` "
                           "(got 'many')"),
    "zero-limit.yaml": (4, "limits.pids: must be at least 1 (got 0)"),
    "negative.yaml": (3, "threads.intra_op: must be at least 1 (got -4)"),
    "unknown-unit.yaml": (3, "limits.stack: unknown unit 'XB'"),
    "decimal-unit.yaml": (3, "limits.memory: GB is ambiguous (10^9 bytes elsewhere); sizes "
                             "here are binary: write 7.7GiB"),
    "unknown-key.yaml": (4, "limits.pidz: unknown key; did you mean 'limits.pids'?"),
    "unknown-section.yaml": (2, "thread: unknown key; did you mean 'threads'?"),
    "cycle-a.yaml": (2, "extends: cycle cycle-a -> cycle-b -> cycle-a"),
    "missing-parent.yaml": (3, "extends: profile 'no-such-profile' not found"),
    "wrong-name.yaml": (1, "name: must equal the file name 'wrong-name' (got 'other-name')"),
    "small-split.yaml": (3, "allocator.torch: max_split_size_mb must be a whole number >= 21"),
    "not-mapping.yaml": (1, "expected a mapping of profile keys"),
    "empty.yaml": (1, "the profile is empty"),
    "duplicate.yaml": (4, "limits.pids: duplicate key"),
    "bad-env.yaml": (4, "env.1BAD: not a valid variable name"),
    "bad-choice.yaml": (3, "gpu.vendor: must be one of amd, none, nvidia, auto (got 'intel')"),
    "float-size.yaml": (3, "limits.memory: a size in bytes must be whole"),
    "bad-fraction.yaml": (3, "allocator.xla_mem_fraction: must be at most 1 (got 1.5)"),
}


def test_corpus_is_complete():
    assert set(CORPUS) | {"cycle-b.yaml"} == {p.name for p in BROKEN.glob("*.yaml")}


def _plan(name: str, cwd: Path, in_process: bool) -> tuple[int, str, str]:
    """`launcher plan --profile BROKEN/name` from `cwd`: in this process (CliRunner), or in a
    fresh interpreter where the process boundary is what is under test."""
    args = ["plan", "--profile", str(BROKEN / name)]
    if not in_process:
        proc = subprocess.run([sys.executable, "-m", "launcher", *args], capture_output=True,
                              text=True, cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)})
        return proc.returncode, proc.stdout, proc.stderr
    from click.testing import CliRunner

    from launcher.cli.main import app

    old = Path.cwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(app, args)
    finally:
        os.chdir(old)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_broken_profile_one_line_error(name, tmp_path):
    line, message = CORPUS[name]
    before = set(tmp_path.iterdir())
    # one file through a real process (exit status, stderr, no traceback), the rest in-process
    code, out, err = _plan(name, tmp_path, in_process=name != "bad-yaml.yaml")
    assert code == 1
    assert out == ""
    err = err.strip()
    assert "\n" not in err and "Traceback" not in err
    where = "cycle-b.yaml" if name == "cycle-a.yaml" else name  # the file that closes the cycle
    assert err.startswith(f"error: {BROKEN / where}:{line}: ") or err.startswith(
        f"error: {os.path.relpath(BROKEN / where, tmp_path)}:{line}: "), err
    assert message in err
    assert set(tmp_path.iterdir()) == before  # nothing written


def test_missing_file_and_unknown_name():
    with pytest.raises(ProfileError, match="no such profile file"):
        load_profile(BROKEN / "nope.yaml")
    with pytest.raises(ProfileError, match="profile 'gtx1605' not found; did you mean 'gtx1650'"):
        load_profile("gtx1605")


def test_shipped_profiles():
    names = set(available())
    assert {"base", "auto", "gtx1650", "docker-5gpu", "rig-6600", "runpod"} <= names
    for name in names:
        p = load_profile(name)
        assert p.name == name
    rig = load_profile("rig-6600")
    assert rig.chain == ["base", "rig-6600"]
    assert rig.get("gpu.count") == 12 and rig.get("gpu.gfx_version") == "10.3.0"
    assert rig.get("hardware.memory") == int(7.7 * (1 << 30))
    assert rig.get("threads.omp_stack") == 512 * 1024  # inherited from base
    assert rig.where("threads.omp_stack") == "profiles/base.yaml:22"
    five = load_profile("docker-5gpu")
    assert (five.get("limits.pids"), five.get("threads.inter_op"),
            five.get("threads.intra_op"), five.get("threads.omp")) == (7680, 2, 4, 2)


def test_user_profile_path_and_folder(tmp_path, monkeypatch):
    mine = tmp_path / "mine.yaml"
    mine.write_text("extends: gtx1650\nthreads:\n  intra_op: 3\nenv:\n  FOO: 'a b'\n")
    p = load_profile(str(mine))
    assert p.name == "mine" and p.get("threads.intra_op") == 3
    assert p.get("allocator.torch") == "max_split_size_mb:32"
    assert p.get("env") == {"FOO": "a b"}
    monkeypatch.setenv("LAUNCHER_PROFILE_PATH", str(tmp_path))
    assert "mine" in available()
    assert load_profile("mine").path == mine


def test_schema_keys_documented_in_readme():
    readme = (ROOT / "docs" / "profiles.md").read_text()
    for dotted, _ in walk_schema():
        assert f"`{dotted}`" in readme, f"docs/profiles.md does not document {dotted}"


def test_the_plugin_keys_table_is_current():
    """docs/profiles.md's table of the plugins' keys is the registries' (vendors, frameworks,
    workloads shipped with launcher): a key added, renamed or reworded fails here until
    scripts/profile-keys-doc.py is run."""
    from launcher.profiles.key_table import plugin_keys_table, with_table

    doc = (ROOT / "docs" / "profiles.md").read_text()
    assert with_table(doc, plugin_keys_table()) == doc, "run scripts/profile-keys-doc.py"
    assert "| `recommended.num_envs` | integer | workload stress-jax |" in doc
    assert "| `allocator.xla_mem_fraction` | number (0.01-1) | framework jax |" in doc


def test_the_plugin_keys_check_can_fail():
    from launcher.profiles.key_table import BEGIN, END, plugin_keys_table, with_table

    doc = f"a\n{BEGIN}\n| old |\n{END}\nb\n"
    assert with_table(doc, "| new |\n") == f"a\n{BEGIN}\n| new |\n{END}\nb\n" != doc
    assert "| `gpu.gfx_version` | string | vendor amd |" in plugin_keys_table()
    with pytest.raises(ValueError, match="markers"):
        with_table("no markers here\n", "| new |\n")


def test_a_written_profile_replaces_the_old_one_only_when_it_loads(tmp_path):
    from launcher.errors import LauncherError
    from launcher.profiles.writer import check_target, write_profile

    base = load_profile("base")
    target = tmp_path / "mine.yaml"
    write_profile(target, base, "launcher test", {"jobs": {"chunk_size": 40}}, ["a\nnote"])
    first = target.read_text()
    assert first.startswith("# Written by `launcher test` on ") and "# a note\n" in first
    assert load_profile(target).get("jobs.chunk_size") == 40
    check_target(target, base, "--write-profile")  # ours: may be replaced
    with pytest.raises(ProfileError):  # a value the schema refuses: the old file stays
        write_profile(target, base, "launcher test", {"jobs": {"chunk_size": "many"}}, [])
    assert target.read_text() == first and list(tmp_path.iterdir()) == [target]
    with pytest.raises(LauncherError, match="measured under"):
        check_target(target, load_profile(target), "--write-profile")
    with pytest.raises(LauncherError, match="measured under"):  # one it extends
        check_target(base.path, load_profile(target), "--write-profile")
    from launcher.caps.resolve import resolve
    from launcher.probe import probe_host

    resolved = resolve(load_profile(target), probe_host(FIXTURES / "hosts" / "v2-limited"))
    with pytest.raises(LauncherError, match="measured under"):  # as the commands have it
        check_target(base.path, resolved.profile, "--write-profile")


def test_minus_one_is_unlimited_where_unlimited_is_allowed_and_documented(tmp_path):
    from launcher.profiles.loader import UNLIMITED

    ok = tmp_path / "minus-one.yaml"
    ok.write_text("extends: base\nlimits: {pids: -1, memlock: -1}\n")
    prof = load_profile(str(ok))
    assert prof.get("limits.pids") == UNLIMITED and prof.get("limits.memlock") == UNLIMITED
    bad = tmp_path / "minus-two.yaml"
    bad.write_text("extends: base\nlimits: {pids: -2}\n")
    with pytest.raises(ProfileError, match="limits.pids: must be at least 1"):
        load_profile(str(bad))
    readme = (ROOT / "docs" / "profiles.md").read_text()
    assert "`-1` means the same" in readme


def test_a_name_is_first_looked_for_in_the_current_folder(tmp_path, monkeypatch):
    """`--profile laptop` beside ./laptop.yaml finds it (and a typo of it gets its name), and
    a profile it extends is still found beside it, then in the shipped folder."""
    (tmp_path / "laptop.yaml").write_text("extends: gtx1650\nthreads: {intra_op: 3}\n")
    (tmp_path / "gtx1650.yaml").write_text("extends: base\nthreads: {intra_op: 5}\n")
    monkeypatch.chdir(tmp_path)
    p = load_profile("laptop")
    assert p.path == tmp_path / "laptop.yaml" and p.get("threads.intra_op") == 3
    assert p.files[1] == tmp_path / "gtx1650.yaml"  # `extends` beside the file first
    with pytest.raises(ProfileError, match="did you mean 'laptop'"):
        load_profile("lapto")
    monkeypatch.chdir(tmp_path.parent)
    with pytest.raises(ProfileError, match="profile 'laptop' not found"):
        load_profile("laptop")


def test_a_name_found_nowhere_lists_the_profiles_not_every_yaml_here(tmp_path, monkeypatch):
    (tmp_path / "job.yaml").write_text("name: j\ncommand: [true]\nitems: 3\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ProfileError) as err:
        load_profile("zzzz")
    assert "known: auto, base," in str(err.value) and "job" not in str(err.value).split(
        "known:")[1].split("(")[0]


def test_a_parsed_profile_is_kept_and_an_edit_is_seen(tmp_path, monkeypatch):
    """The JSON kept in the user's cache spares PyYAML's import; an edited file (its size or
    times change) is parsed again, and a value JSON cannot give back is not kept."""
    from launcher.profiles import yamlsrc

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    prof = tmp_path / "mine.yaml"
    prof.write_text("extends: base\nthreads: {intra_op: 3}\n")
    assert load_profile(str(prof)).get("threads.intra_op") == 3
    kept = list((tmp_path / "cache/launcher/yaml").glob("*.json"))
    assert len(kept) == 2  # mine and base
    calls = []
    real = yamlsrc._parse
    monkeypatch.setattr(yamlsrc, "_parse", lambda p, what: calls.append(p) or real(p, what))
    again = load_profile(str(prof))
    assert calls == [] and again.get("threads.intra_op") == 3
    assert again.where("threads.intra_op").endswith("mine.yaml:2")  # lines kept too
    prof.write_text("extends: base\nthreads: {intra_op: 4}\n")
    assert load_profile(str(prof)).get("threads.intra_op") == 4 and calls == [prof]
    dated = tmp_path / "dated.yaml"
    dated.write_text("when: 2026-11-23\n")
    yamlsrc.load_yaml(dated)
    yamlsrc.load_yaml(dated)
    assert calls.count(dated) == 2  # a date does not survive JSON: parsed each time
    monkeypatch.setattr(yamlsrc, "CACHE_KEEP", 2)
    for i in range(3):
        (tmp_path / f"x{i}.yaml").write_text(f"a: {i}\n")
        yamlsrc.load_yaml(tmp_path / f"x{i}.yaml")
    assert len(list((tmp_path / "cache/launcher/yaml").glob("*.json"))) <= 3


def test_validate_takes_a_profile_name_as_profile_does():
    """`launcher profiles validate gtx1650` checks the profile every other command would load
    by that name (a new user's first try); a name nothing has is one line, exit 1."""
    from click.testing import CliRunner

    from launcher.cli.main import app

    ok = CliRunner().invoke(app, ["profiles", "validate", "gtx1650"])
    assert ok.exit_code == 0 and ok.stdout == "ok: gtx1650\n", ok.output
    bad = CliRunner().invoke(app, ["profiles", "validate", "gtx1560"])
    assert bad.exit_code == 1 and "profile 'gtx1560' not found" in bad.stderr
