"""launcher/cgroups/placement.py at its edges, on host trees written under tmp_path (as the
fixtures in tests/fixtures/placement are; launcher is PID 100): v1 controllers in cgroups of
their own, hierarchies named but not mounted, ties, leftover leaves, the carried limits and the
sentences of each refusal (tests that kill the mutants scripts/mutation.py found)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import types
from pathlib import Path

import pytest

import launcher.cgroups.placement as placement
from launcher.cgroups.placement import (
    FIX,
    LEAF,
    Carried,
    Decision,
    Placement,
    carried_limits,
    empty_leaves,
    place,
    search_dirs,
    uncarried_limits,
)
from tests.conftest import FIXTURES
from tests.host_trees import V2_MOUNT, host

LAUNCHER = {100}
OLD = 1_000_000_000  # a leaf's mtime long before the test's clock


def v1_mount(n: int, hierarchy: str, root: str = "/", options: str = "") -> str:
    return (f"{n} 25 0:{n} {root} /sys/fs/cgroup/{hierarchy} rw,nosuid - cgroup cgroup "
            f"rw,{options or hierarchy}\n")


def anything(_: Path) -> bool:
    return True


def nothing(_: Path) -> bool:
    return False


def test_the_decision_records_are_values_that_cannot_change():
    carried = Carried("pids.max", "60", Path("/cg/a"))
    p = Placement("v2", Path("/cg"), ("pids",), carry=(carried,))
    d = Decision((p,), {})
    for record, name in ((carried, "value"), (p, "mode"), (d, "advisory")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(record, name, "changed")
    assert len({p, Placement("v2", Path("/cg"), ("pids",), carry=(carried,))}) == 1


# cgroup v1: each controller where its own hierarchy has the caller


def test_v1_each_controller_is_placed_by_its_own_cgroup_path(tmp_path):
    root = host(tmp_path, {
        "proc/self/cgroup": "3:pids:/jobs/a\n2:memory:/users/b\n",
        "proc/self/mountinfo": v1_mount(30, "pids") + v1_mount(31, "memory"),
        "sys/fs/cgroup/pids/jobs/a/": "",
        "sys/fs/cgroup/memory/users/b/": "",
    })
    cg = root / "sys/fs/cgroup"
    a, b = cg / "pids/jobs/a", cg / "memory/users/b"
    assert place(("pids", "memory"), root, writable=anything, ours=LAUNCHER) == Decision(
        (Placement("v1", a, ("pids",), caller=a), Placement("v1", b, ("memory",), caller=b)),
        {})


def test_v1_a_hierarchy_named_but_not_mounted_is_advisory_and_the_others_placed(tmp_path):
    """/proc/self/cgroup lists memory and the v2 line (as every v1 kernel does), but neither
    memory nor cgroup2 is mounted."""
    root = host(tmp_path, {
        "proc/self/cgroup": "4:memory:/x\n3:pids:/a\n0::/a\n",
        "proc/self/mountinfo": v1_mount(30, "pids"),
        "sys/fs/cgroup/pids/a/": "",
    })
    a = root / "sys/fs/cgroup/pids/a"
    assert place(("pids", "memory"), root, writable=anything, ours=LAUNCHER) == Decision(
        (Placement("v1", a, ("pids",), caller=a),),
        {"memory": "no cgroup controller found for memory"})


def test_search_dirs_each_v1_hierarchy_by_its_own_mount(tmp_path):
    """Docker on v1: every hierarchy mounted at the container's cgroup, listed cpu first; a
    hierarchy named but not mounted (net_cls) and a named one (systemd) add nothing."""
    root = host(tmp_path, {
        "proc/self/cgroup": ("5:net_cls:/docker/abc\n4:pids:/docker/abc\n"
                             "3:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n0::/\n"),
        "proc/self/mountinfo": (
            v1_mount(30, "cpu,cpuacct", "/docker/abc") + v1_mount(31, "pids", "/docker/abc")
            + v1_mount(32, "systemd", "/docker/abc", "xattr,name=systemd")
            + "33 25 0:33 /docker/abc /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"),
        "sys/fs/cgroup/cpu,cpuacct/": "",
        "sys/fs/cgroup/pids/": "",
        "sys/fs/cgroup/systemd/": "",
        "sys/fs/cgroup/unified/": "",
    })
    cg = root / "sys/fs/cgroup"
    assert search_dirs(root) == [cg / "unified", cg / "pids", cg / "cpu,cpuacct"]


# cgroup v2: which line of /proc/self/cgroup, and the v2 line without a cgroup2 mount


def test_v2_a_named_v1_hierarchy_listed_first_is_not_the_v2_cgroup(tmp_path):
    root = tmp_path / "host"
    shutil.copytree(FIXTURES / "placement/v2-root", root)
    (root / "proc/self/cgroup").write_text("1:name=systemd:/user.slice/session-1.scope\n0::/\n")
    (root / "sys/fs/cgroup/user.slice/session-1.scope").mkdir(parents=True)
    cg = root / "sys/fs/cgroup"
    assert place(("pids", "memory"), root, writable=anything, ours=LAUNCHER) == Decision(
        (Placement("v2", cg, ("pids", "memory"), ((cg, ("pids",)),), mode="root",
                   caller=cg),), {})


def test_v2_line_without_a_cgroup2_mount_is_no_controller(tmp_path):
    root = host(tmp_path, {
        "proc/self/cgroup": "3:pids:/a\n0::/a\n",
        "proc/self/mountinfo": v1_mount(30, "pids"),
        "sys/fs/cgroup/pids/a/": "",
    })
    d = place(("rdma",), root, writable=anything, ours=LAUNCHER)
    assert d == Decision((), {"rdma": "no cgroup controller found for rdma"})
    assert search_dirs(root) == [root / "sys/fs/cgroup/pids/a", root / "sys/fs/cgroup/pids"]


# cgroup v2: the rule's steps, the first among equals, the sentences


def scope_host(root: Path, procs: str) -> tuple[Path, Path, Path]:
    """root -> user.slice -> session-1.scope (the caller's, with pids.max 50)."""
    host(root, {
        "proc/self/cgroup": "0::/user.slice/session-1.scope\n",
        "proc/self/mountinfo": V2_MOUNT,
        "sys/fs/cgroup/cgroup.controllers": "cpu memory pids\n",
        "sys/fs/cgroup/cgroup.subtree_control": "memory pids\n",
        "sys/fs/cgroup/cgroup.procs": "1\n",
        "sys/fs/cgroup/user.slice/cgroup.type": "domain\n",
        "sys/fs/cgroup/user.slice/cgroup.controllers": "memory pids\n",
        "sys/fs/cgroup/user.slice/cgroup.subtree_control": "memory pids\n",
        "sys/fs/cgroup/user.slice/cgroup.procs": "",
        "sys/fs/cgroup/user.slice/session-1.scope/cgroup.type": "domain\n",
        "sys/fs/cgroup/user.slice/session-1.scope/cgroup.controllers": "memory pids\n",
        "sys/fs/cgroup/user.slice/session-1.scope/cgroup.subtree_control": "",
        "sys/fs/cgroup/user.slice/session-1.scope/cgroup.procs": procs,
        "sys/fs/cgroup/user.slice/session-1.scope/pids.max": "50\n",
    })
    cg = root / "sys/fs/cgroup"
    return cg, cg / "user.slice", cg / "user.slice/session-1.scope"


@pytest.mark.parametrize(("procs", "granted", "first"), [
    ("100\n812\n", (), "cannot write {s}"),
    ("100\n812\n813\n814\n815\n", ("s",), "{s} holds other processes (PID 812, 813, 814)"),
    ("100\n", ("s",), "cannot write {s}/cgroup.procs"),
])
def test_v2_each_step_says_why_and_a_limit_left_behind_is_named(tmp_path, procs, granted,
                                                                 first):
    """The caller's cgroup (its sentence first), then its parent, whose run would leave the
    scope's pids.max 50 and cannot enable pids to carry it; the root's own reason is not
    added (only the caller's cgroup and the nearest ancestor are told)."""
    cg, u, s = scope_host(tmp_path, procs)
    allowed = {s} if granted else set()
    d = place(("pids",), tmp_path, writable=lambda p: p in allowed, ours=LAUNCHER)
    assert d == Decision((), {"pids": (
        f"cgroup v2 pids: {first.format(s=s)}, and a run under {u} would leave the pids.max "
        f"50 of {s}, which it could not carry (cannot write {u}); {FIX}")})


def mid_host(root: Path, own_procs: str) -> tuple[Path, Path, Path]:
    """root -> mid (gives pids to its children) -> own (the caller's)."""
    host(root, {
        "proc/self/cgroup": "0::/mid/own\n",
        "proc/self/mountinfo": V2_MOUNT,
        "sys/fs/cgroup/cgroup.controllers": "memory pids\n",
        "sys/fs/cgroup/cgroup.subtree_control": "memory pids\n",
        "sys/fs/cgroup/cgroup.procs": "1\n",
        "sys/fs/cgroup/mid/cgroup.type": "domain\n",
        "sys/fs/cgroup/mid/cgroup.controllers": "memory pids\n",
        "sys/fs/cgroup/mid/cgroup.subtree_control": "pids\n",
        "sys/fs/cgroup/mid/cgroup.procs": "",
        "sys/fs/cgroup/mid/own/cgroup.type": "domain\n",
        "sys/fs/cgroup/mid/own/cgroup.controllers": "pids\n",
        "sys/fs/cgroup/mid/own/cgroup.subtree_control": "",
        "sys/fs/cgroup/mid/own/cgroup.procs": own_procs,
    })
    cg = root / "sys/fs/cgroup"
    return cg, cg / "mid", cg / "mid/own"


def test_v2_of_places_that_take_as_many_the_callers_own_comes_first(tmp_path):
    """pids both in the caller's cgroup (after the leaf move) and beside it under mid; memory
    nowhere, as mid's subtree_control cannot be written: the first place is kept."""
    cg, mid, own = mid_host(tmp_path, "100\n")
    allowed = {own, own / "cgroup.procs", own / "cgroup.subtree_control", mid}
    d = place(("pids", "memory"), tmp_path, writable=lambda p: p in allowed, ours=LAUNCHER)
    why = f"cannot write {mid / 'cgroup.subtree_control'}"
    assert d == Decision(
        (Placement("v2", own, ("pids",), ((own, ("pids",)),), own / LEAF, (100,),
                   mode="leaf", caller=own),),
        {"memory": f"cgroup v2 memory: {why}, and {why}; {FIX}"})


def test_v2_a_callers_cgroup_with_no_process_is_used_without_a_leaf(tmp_path):
    cg, mid, own = mid_host(tmp_path, "")
    d = place(("pids",), tmp_path, writable=anything, ours=LAUNCHER)
    assert d == Decision((Placement("v2", own, ("pids",), ((own, ("pids",)),), mode="own",
                                    caller=own),), {})


# The limits a run would leave: the tightest, ties, and those not carried


def levels(tmp_path: Path, *files: dict[str, str]) -> list[Path]:
    """Directories leaf first (as the cgroups a run leaves), each with its files."""
    dirs = []
    for i, content in enumerate(files):
        d = tmp_path / f"level{i}"
        host(d, {"./": "", **content})
        dirs.append(d)
    return dirs


@pytest.mark.parametrize(("own", "parent", "tightest"), [
    ("50000 100000", "40000 50000", 0),  # 0.5 CPU against 0.8: the smaller quota is looser
    ("80000 100000", "30000 100000", 1),  # 0.8 against 0.3
])
def test_the_tightest_cpu_max_is_the_smallest_quota_over_period(tmp_path, own, parent,
                                                                  tightest):
    dirs = levels(tmp_path, {"cpu.max": own}, {"cpu.max": parent})
    assert carried_limits(dirs) == (Carried("cpu.max", (own, parent)[tightest],
                                            dirs[tightest]),)


def test_a_tie_is_carried_from_the_cgroup_nearest_the_caller(tmp_path):
    dirs = levels(tmp_path, {"pids.max": "60"}, {"pids.max": "60"})
    assert carried_limits(dirs) == (Carried("pids.max", "60", dirs[0]),)


def test_io_max_with_one_limited_key_is_not_carried(tmp_path):
    [d] = levels(tmp_path, {"io.max": "8:0 rbps=1048576 wbps=max riops=max wiops=max\n"})
    assert uncarried_limits([d]) == [
        f"io.max '8:0 rbps=1048576 wbps=max riops=max wiops=max' of {d}"]


def test_hugetlb_from_the_unlimited_number_up_is_unlimited(tmp_path):
    [d] = levels(tmp_path, {"hugetlb.2MB.max": f"{1 << 62}\n",
                            "hugetlb.1GB.max": f"{(1 << 62) - 1}\n"})
    assert uncarried_limits([d]) == [f"hugetlb.1GB.max '{(1 << 62) - 1}' of {d}"]


# Leaves a killed launcher left behind (doctor)


def leaves_host(root: Path) -> Path:
    return host(root, {
        "proc/self/cgroup": "0::/app/x\n",
        "proc/self/mountinfo": V2_MOUNT,
        "sys/fs/cgroup/cgroup.procs": "1\n",
        "sys/fs/cgroup/app/x/cgroup.procs": "100\n",
    })


def leaf(root: Path, parent: str, procs: str = "", mtime: float | None = OLD) -> Path:
    d = root / "sys/fs/cgroup" / parent / LEAF
    host(d.parent, {"cgroup.procs": "", "cgroup.subtree_control": "pids\n"})
    host(d, {"cgroup.procs": procs})
    if mtime is not None:
        os.utime(d, (mtime, mtime))
    return d


def test_empty_leaves_found_anywhere_in_the_tree_and_only_those_left_over(tmp_path):
    root = leaves_host(tmp_path)
    found = leaf(root, "s1")  # empty, alone, old: left over
    leaf(root, "s2", procs="4242\n")  # still holds a process
    leaf(root, "s3")
    (root / "sys/fs/cgroup/s3/launcher-4242-r").mkdir()  # a run beside it: in use
    leaf(root, "s4", mtime=None)  # just made
    leaf(root, "launcher-9-r/s5")  # inside a run cgroup: not searched
    assert empty_leaves(root) == [found]


def test_a_leaf_exactly_settle_seconds_old_is_left_over(tmp_path, monkeypatch):
    root = leaves_host(tmp_path)
    found = leaf(root, "s1")
    monkeypatch.setattr(placement, "time", types.SimpleNamespace(time=lambda: OLD + 10.0))
    assert empty_leaves(root) == [found]
    monkeypatch.setattr(placement, "time", types.SimpleNamespace(time=lambda: OLD + 9.5))
    assert empty_leaves(root) == []


def test_no_cgroup2_mount_no_leaves_and_a_vanished_leaf_is_not_left_over(tmp_path):
    root = host(tmp_path, {"proc/self/cgroup": "3:pids:/a\n",
                           "proc/self/mountinfo": v1_mount(30, "pids")})
    assert empty_leaves(root) == []
    assert placement._abandoned(tmp_path / "gone" / LEAF) is False
