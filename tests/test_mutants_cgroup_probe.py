"""launcher/probe/cgroup.py at its edges, on host trees written under tmp_path (as the fixtures
in tests/fixtures/hosts are): mismatched mounts, v1 controllers in cgroups of their own,
ties, limits at equality (tests that kill the mutants scripts/mutation.py found)."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.errors import HostError
from launcher.probe.cgroup import (
    V1_UNLIMITED,
    Chain,
    cgroup_dirs,
    effective_cpus,
    find_chains,
    limit_dir,
    parse_cpu_list,
    pids_binding,
    read_cpu_quota,
    read_memory,
    round_quota,
)
from launcher.probe.mountinfo import Membership, Mount
from tests.host_trees import V2_MOUNT, host


def v1_mount(n: int, hierarchy: str, root: str = "/") -> str:
    return (f"{n} 25 0:{n} {root} /sys/fs/cgroup/{hierarchy} rw,nosuid - cgroup cgroup "
            f"rw,{hierarchy}\n")


# Which cgroup is ours: find_chains and holding_mount


def test_the_unified_line_is_the_0_line_not_a_named_v1_hierarchy(tmp_path):
    """A named hierarchy (name=systemd) has no controllers, as the v2 line has none: only the
    line of hierarchy 0 names the v2 cgroup."""
    root = host(tmp_path, {
        "proc/self/cgroup": "1:name=systemd:/user.slice/session-1.scope\n0::/app\n",
        "proc/self/mountinfo": V2_MOUNT + ("33 25 0:29 / /sys/fs/cgroup/systemd rw - cgroup "
                                           "cgroup rw,xattr,name=systemd\n"),
        "sys/fs/cgroup/cgroup.controllers": "cpu memory pids\n",
        "sys/fs/cgroup/app/cgroup.controllers": "pids\n",
        "sys/fs/cgroup/systemd/user.slice/session-1.scope/": "",
    })
    cg = root / "sys/fs/cgroup"
    chains = find_chains(root)
    assert chains["pids"] == Chain("v2", (cg / "app", cg))


def test_v1_controllers_are_read_each_from_its_own_cgroup(tmp_path):
    root = host(tmp_path, {
        "proc/self/cgroup": "3:pids:/jobs/a\n2:memory:/users/b\n",
        "proc/self/mountinfo": v1_mount(30, "pids") + v1_mount(31, "memory"),
        "sys/fs/cgroup/pids/jobs/a/pids.max": "50\n",
        "sys/fs/cgroup/memory/users/b/memory.limit_in_bytes": "1048576\n",
    })
    cg = root / "sys/fs/cgroup"
    assert find_chains(root) == {
        "memory": Chain("v1", (cg / "memory/users/b", cg / "memory/users", cg / "memory")),
        "pids": Chain("v1", (cg / "pids/jobs/a", cg / "pids/jobs", cg / "pids")),
    }


def test_a_hierarchy_named_in_proc_self_cgroup_but_not_mounted_is_no_chain(tmp_path):
    root = host(tmp_path, {
        "proc/self/cgroup": "4:memory:/x\n3:pids:/a\n",
        "proc/self/mountinfo": v1_mount(30, "pids"),
        "sys/fs/cgroup/pids/a/": "",
    })
    cg = root / "sys/fs/cgroup"
    assert find_chains(root) == {"pids": Chain("v1", (cg / "pids/a", cg / "pids"))}


def test_of_two_mounts_that_hold_the_path_the_one_with_our_directory_wins(tmp_path):
    """/mnt/job is the subtree /job mounted again, without our child in it (a stale or
    partial view): the whole hierarchy's mount, where /job/x exists, holds our cgroup."""
    root = host(tmp_path, {
        "proc/self/cgroup": "0::/job/x\n",
        "proc/self/mountinfo": V2_MOUNT + ("24 30 0:26 /job /mnt/job rw,relatime - cgroup2 "
                                           "cgroup2 rw\n"),
        "sys/fs/cgroup/job/x/cgroup.controllers": "pids\n",
        "mnt/job/": "",
    })
    cg = root / "sys/fs/cgroup"
    assert find_chains(root)["pids"] == Chain("v2", (cg / "job/x", cg / "job", cg))


# cgroup_dirs: the leaf-to-top directories under a mount


def _dirs(tmp_path: Path, mount_root: str, path: str, *existing: str) -> tuple[Path, ...]:
    top = tmp_path / "sys/fs/cgroup/memory"
    for d in ("", *existing):
        (top / d).mkdir(parents=True, exist_ok=True)
    mount = Mount("/sys/fs/cgroup/memory", mount_root, "cgroup", frozenset({"memory"}))
    return tuple(d.relative_to(top).as_posix() for d in cgroup_dirs(
        tmp_path, mount, Membership("4", frozenset({"memory"}), path)))


def test_a_cgroup_below_the_mounted_subtree_is_found_under_its_top(tmp_path):
    assert _dirs(tmp_path, "/job", "/job/step", "step") == ("step", ".")


def test_the_cgroup_at_the_mount_root_is_the_top_even_if_a_child_repeats_its_path(tmp_path):
    assert _dirs(tmp_path, "/docker/abc", "/docker/abc", "docker/abc") == (".",)


def test_a_cgroup_outside_the_mounted_subtree_is_read_relative_to_the_mount(tmp_path):
    """A cgroup namespace: /proc/self/cgroup is relative to the namespace's root, which is
    the mount's view."""
    assert _dirs(tmp_path, "/docker/abc", "/sub", "sub") == ("sub", ".")
    assert _dirs(tmp_path, "/docker/abc", "/") == (".",)


# CPU quota: v1 and v2 files at their limits


def chain(tmp_path: Path, version: str, *levels: dict[str, str]) -> Chain:
    """A chain of directories, leaf first, each with the files given."""
    dirs = []
    for i, files in enumerate(levels):
        d = tmp_path / "cg" / "/".join(["l"] * (len(levels) - 1 - i))
        host(d, {"./": "", **files})
        dirs.append(d)
    return Chain(version, tuple(dirs))


def test_v1_a_quota_without_its_period_file_is_no_limit(tmp_path):
    assert read_cpu_quota(chain(tmp_path, "v1", {"cpu.cfs_quota_us": "50000\n"})) is None


@pytest.mark.parametrize("version,files", [
    ("v1", {"cpu.cfs_quota_us": "0\n", "cpu.cfs_period_us": "100000\n"}),
    ("v2", {"cpu.max": "0 100000\n"}),
])
def test_a_zero_quota_is_refused_quoting_the_file(tmp_path, version, files):
    with pytest.raises(HostError, match="CPU quota is 0; expected a positive number or max"):
        read_cpu_quota(chain(tmp_path, version, files))


def test_v1_minus_one_is_unlimited(tmp_path):
    files = {"cpu.cfs_quota_us": "-1\n", "cpu.cfs_period_us": "100000\n"}
    assert read_cpu_quota(chain(tmp_path, "v1", files)) is None


def test_the_smallest_quota_and_period_are_accepted(tmp_path):
    assert read_cpu_quota(chain(tmp_path, "v2", {"cpu.max": "2 1\n"})) == 2.0
    assert read_cpu_quota(chain(tmp_path / "b", "v2", {"cpu.max": "1 100000\n"})) == 1e-05


def test_a_malformed_cpu_list_names_its_file_or_says_cpu_list():
    with pytest.raises(HostError, match=r"^cpu list: malformed CPU list '0-x'$"):
        parse_cpu_list("0-x")
    with pytest.raises(HostError, match=r"^/c/cpuset.cpus: malformed CPU list '0-x'$"):
        parse_cpu_list("0-x", Path("/c/cpuset.cpus"))


# Which limit binds: ties, the v1 "unlimited" number, headroom


def test_limit_dir_a_tie_is_the_cgroup_nearest_the_leaf(tmp_path):
    ch = chain(tmp_path, "v2", {"pids.max": "50\n"}, {"pids.max": "50\n"})
    assert limit_dir(ch, "pids.max") == ch.dirs[0]


def test_limit_dir_the_v1_unlimited_number_and_above_is_no_limit(tmp_path):
    ch = chain(tmp_path, "v1", {"memory.limit_in_bytes": f"{V1_UNLIMITED}\n"})
    assert limit_dir(ch, "memory.limit_in_bytes") is None
    ch = chain(tmp_path / "b", "v1", {"memory.limit_in_bytes": f"{V1_UNLIMITED - 4096}\n"})
    assert limit_dir(ch, "memory.limit_in_bytes") == ch.dirs[0]


def test_pids_an_ancestors_limit_counts_the_leafs_tasks_when_it_has_no_counter(tmp_path):
    ch = chain(tmp_path, "v2", {"pids.current": "7\n"}, {"pids.max": "30\n"})
    assert pids_binding(ch) == (30, 7, ch.dirs[1])


def test_pids_with_no_counter_anywhere_nothing_is_counted_as_used(tmp_path):
    ch = chain(tmp_path, "v2", {"pids.max": "40\n"})
    assert pids_binding(ch) == (40, 0, ch.dirs[0])


@pytest.mark.parametrize(("leaf", "parent", "binds"), [
    ((100, 20), (60, 30), 1),  # 30 left above, 80 in the leaf: the parent binds
    ((50, 40), (100, 60), 0),  # 10 left in the leaf, 40 above: the leaf binds
    ((50, 40), (100, 90), 0),  # 10 and 10: a tie is the leaf's
])
def test_pids_the_least_headroom_binds(tmp_path, leaf, parent, binds):
    ch = chain(tmp_path, "v2", *({"pids.max": f"{m}\n", "pids.current": f"{c}\n"}
                                 for m, c in (leaf, parent)))
    limit, used = (leaf, parent)[binds]
    assert pids_binding(ch) == (limit, used, ch.dirs[binds])


# Memory: the unlimited number, the smallest limit, usage in v1 and v2


def test_memory_the_v1_unlimited_number_is_no_limit_and_one_byte_is_a_limit(tmp_path):
    v1 = chain(tmp_path, "v1", {"memory.limit_in_bytes": f"{V1_UNLIMITED}\n",
                                "memory.usage_in_bytes": "4096\n"})
    assert read_memory(v1) == (None, 4096, None)
    v2 = chain(tmp_path / "b", "v2", {"memory.max": "1\n", "memory.current": "8192\n",
                                      "memory.events": "low 0\noom 1\noom_kill 1\n"})
    assert read_memory(v2) == (1, 8192, 1)


def test_memory_max_zero_is_the_strictest_limit(tmp_path):
    ch = chain(tmp_path, "v2", {"memory.max": "0\n"}, {"memory.max": "1048576\n"})
    assert limit_dir(ch, "memory.max") == ch.dirs[0]  # holds today
    assert read_memory(ch)[0] == 0  # None today


# Rounding: at least one CPU


def test_round_quota_is_at_least_one_both_ways():
    assert round_quota(0.3) == 1
    assert round_quota(0.3, "half-up") == 1
    assert round_quota(2.5, "half-up") == 3


def test_effective_cpus_is_at_least_one_even_from_an_empty_affinity():
    assert effective_cpus(0, None, None) == 1
    assert effective_cpus(8, 0, None) == 8  # cpuset 0: unknown, not zero CPUs
