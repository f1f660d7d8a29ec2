"""One rule for a test that cannot run here (issue 47): what an install or a daemon gives (Docker,
Podman, Ray, Slurm, a framework, mkdocs, root) is asked through conftest.need, which skips
outside CI and fails under CI, so no claim passes in CI by being skipped. A plain skip is left
only for a fact of the host that no install changes; each is listed here with its reason, and
a new one (or a file reading `CI` itself) fails this test until it is listed or uses need()."""

from __future__ import annotations

import re

from tests.conftest import ROOT

# file -> its plain skips, one reason each: facts of the host, not things CI installs
HOST = {
    "test_cgroup_placement.py": [
        "a cgroup2 mount at /sys/fs/cgroup/unified offering hugetlb (the kernel's and mounts')",
        "this process in the cgroup v2 root (where the host put it)",
    ],
    "test_docker_images.py": ["the daemon's default nofile (its configuration)"],
    "test_engine_behaviour.py": ["rootless Podman is its own unprivileged caller (no case)"],
    "test_everyday.py": ["a registry reachable from this host (its network)"],
    "test_fit.py": ["2 CPUs"] * 3,
    "test_growth.py": [
        "the checkout readable by another UID (not in a private copy: scripts/mutation.py)"],
    "test_hints.py": ["PyPI reached without a proxy's CA (its network)"],
    "test_thread_causes.py": [
        "the checkout readable by another UID (not in a private copy: scripts/mutation.py)",
        "a pid_max per PID namespace (Linux 6.14+)",
    ],
    "test_supervise_spawn.py": ["an x86_64 or aarch64 machine (the clone3 filter's numbers)",
                                "a seccomp filter this process may install (the kernel's)"],
    "test_supervise_watcher.py": ["a cgroup v1 memory controller (the host's cgroup layout)"] * 2,
    "test_thread_estimate.py": ["2 CPUs"],
    "test_verdict_bounds.py": ["a pids limit that separates the two estimates on this host"],
    "test_old_python.py": ["a python3.X that is no pyenv prefix an image can take whole"],
}
# the cgroup v2 lab boots its own kernel (UML or QEMU): .ci/run runs it apart, and it says
# itself what CI lacks for it
NOT_YET = {"test_cgroup2_lab.py"}

PLAIN = re.compile(r"pytest\.skip\(|\.skipif\(|importorskip\(")
READS_CI = re.compile(r"""environ(\.get\(|\[)["']CI["']""")


def _files() -> list:  # type: ignore[type-arg]
    return [p for p in sorted((ROOT / "tests").rglob("*.py")) if p.name not in NOT_YET]


def test_only_facts_of_the_host_skip_plainly():
    found = {p.name: n for p in _files() if p.name != "conftest.py"
             and (n := len(PLAIN.findall(p.read_text())))}
    assert found == {name: len(why) for name, why in HOST.items()}


def test_ci_is_read_in_conftest_alone():
    assert [p.name for p in _files() if READS_CI.search(p.read_text())] == ["conftest.py"]


def test_no_test_file_imports_another():
    """Helpers shared by test files live in modules of their own (tests/conftest.py,
    polling.py, supervised.py, growth_runs.py, ...): a test file that imports another's runs
    that file's module and couples two files' private helpers."""
    imports = re.compile(r"^\s*(?:from|import)\s+tests\.(?:lab\.)?test_\w+", re.M)
    assert [p.name for p in _files() if imports.search(p.read_text())] == []
