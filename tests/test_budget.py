"""The budgets at their boundaries (issue 21's mutation survivors): the tasks RLIMIT_NPROC
leaves, root's exemption from it, the smallest limit winning, and the memory the processes
share when the profile's hardware is larger or smaller than this host."""

from __future__ import annotations

import shutil
from pathlib import Path

from launcher.caps.budget import memory_budget, pids_budget
from launcher.caps.resolve import Resolved
from launcher.probe import probe_host
from tests.conftest import ROOT
from tests.docker_helpers import resolved

LIMITED = ROOT / "tests/fixtures/hosts/v2-limited"  # UID 1000 runs 5 tasks; memory.max 300MiB


def _resolve(tmp_path: Path, text: str, host: Path = LIMITED) -> Resolved:
    return resolved(tmp_path, text, probe_host(host, environ={}), name="b")  # type: ignore[no-any-return]


def _budget(r: Resolved) -> dict:  # type: ignore[type-arg]
    return pids_budget(r.caps.limits, r.caps.ulimits, r.facts)


def test_rlimit_nproc_leaves_the_limit_less_the_uids_tasks(tmp_path):
    r = _resolve(tmp_path, "limits: {nproc: 50}\n")
    assert r.facts.uid == 1000 and r.facts.uid_tasks == 5 and not r.facts.nproc_exempt
    b = _budget(r)
    assert b.available == 45
    assert b.binding == "RLIMIT_NPROC 50 (5 tasks of UID 1000 running)"
    assert b.notes == ()


def test_root_of_the_initial_namespace_is_exempt_and_told_so(tmp_path):
    host = tmp_path / "host"
    shutil.copytree(LIMITED, host)
    status = host / "proc/self/status"
    status.write_text(status.read_text().replace("Uid:\t1000\t1000", "Uid:\t0\t0"))
    (host / "proc/self/uid_map").write_text("         0          0 4294967295\n")
    r = _resolve(tmp_path, "limits: {nproc: 50}\n", host)
    assert r.facts.nproc_exempt
    b = _budget(r)
    assert "RLIMIT_NPROC" not in b.binding
    assert list(b.notes) == ["RLIMIT_NPROC 50 does not bind: the kernel exempts root (of the "
                          "initial user namespace, or CAP_SYS_RESOURCE/CAP_SYS_ADMIN there)"]
    # a rootless container's root (uid 0 mapped to another) is not exempt
    (host / "proc/self/uid_map").write_text("         0       1000          1\n")
    assert not probe_host(host, environ={}).nproc_exempt
    # nor is another user with no capability
    (host / "proc/self/uid_map").write_text("         0          0 4294967295\n")
    status.write_text(status.read_text().replace("Uid:\t0\t0", "Uid:\t1000\t1000"))
    assert not probe_host(host, environ={}).nproc_exempt
    # CAP_SYS_RESOURCE (bit 24) in the initial namespace is
    status.write_text(status.read_text() + "CapEff:\t0000000001000000\n")
    assert probe_host(host, environ={}).nproc_exempt


def test_the_smallest_limit_binds_and_a_tie_names_the_first(tmp_path):
    # pids.max 77 of the fixture's cgroup with 3 running: 74; nproc 79 - 5 = 74 too
    b = _budget(_resolve(tmp_path, "limits: {nproc: 79}\n"))
    assert b.available == 74 and b.binding.startswith("pids.max 77")
    b = _budget(_resolve(tmp_path, "limits: {nproc: 78}\n"))
    assert b.available == 73 and b.binding.startswith("RLIMIT_NPROC 78")
    b = _budget(_resolve(tmp_path, "limits: {nproc: 80, pids: 60}\n"))
    assert b.available == 60 and b.binding == "pids limit 60"


def test_memory_budget_is_the_smaller_of_the_profiles_hardware_and_this_hosts(tmp_path):
    host = probe_host(LIMITED, environ={}).host_memory()
    assert host == 300 << 20  # the cgroup's memory.max
    big = _resolve(tmp_path, "hardware: {memory: 1TiB}\n")
    assert memory_budget(big.profile, big.caps.limits, big.facts) == host
    small = _resolve(tmp_path, "hardware: {memory: 100MiB}\n")
    assert memory_budget(small.profile, small.caps.limits, small.facts) == 100 << 20
    asked = _resolve(tmp_path, "hardware: {memory: 100MiB}\nlimits: {memory: 2GiB}\n")
    assert memory_budget(asked.profile, asked.caps.limits, asked.facts) == 2 << 30
    auto = _resolve(tmp_path, "limits: {memory: auto}\n")
    assert memory_budget(auto.profile, auto.caps.limits, auto.facts) == host


def _facts(**changes: object):  # type: ignore[no-untyped-def]
    """The fixture's facts with some changed (cgroup fields as cgroup_FIELD)."""
    import dataclasses

    facts = probe_host(LIMITED, environ={})
    cg = {k[len("cgroup_"):]: v for k, v in changes.items() if k.startswith("cgroup_")}
    rest = {k: v for k, v in changes.items() if not k.startswith("cgroup_")}
    return dataclasses.replace(facts, cgroup=dataclasses.replace(facts.cgroup, **cg), **rest)


def _limits(tmp_path: Path):  # type: ignore[no-untyped-def]
    return _resolve(tmp_path, "").caps.limits


def test_each_host_limit_binds_where_it_is_the_smallest(tmp_path):
    from launcher.probe.limits import Rlimit

    limits = _limits(tmp_path)
    none = dict(cgroup_pids_max=None, threads_max=None, pid_max=None, rlimits={})
    assert pids_budget(limits, {}, _facts(**none)).to_json() == {
        "available": None, "binding": "no limit found", "notes": []}
    # pids.current unread: nothing counted as running
    b = pids_budget(limits, {}, _facts(**{**none, "cgroup_pids_max": 50,
                                           "cgroup_pids_current": None}))
    assert b.available == 50 and b.binding.startswith("pids.max 50 of ")
    assert b.binding.endswith("(pids.current 0)")
    # the host's own RLIMIT_NPROC, where the profile sets none
    b = pids_budget(limits, {}, _facts(**{**none, "rlimits": {"nproc": Rlimit(40, 40)}}))
    assert b.available == 35 and b.binding.startswith("RLIMIT_NPROC 40")
    # 0 is a limit (no new task at all); unlimited is none
    b = pids_budget(limits, {}, _facts(**{**none, "rlimits": {"nproc": Rlimit(0, 0)}}))
    assert b.available == -5
    b = pids_budget(limits, {}, _facts(**{**none, "rlimits": {"nproc": Rlimit(None, None)}}))
    assert b.available is None
    b = pids_budget(limits, {}, _facts(**{**none, "nproc_exempt": True,
                                           "rlimits": {"nproc": Rlimit(0, 0)}}))
    assert b.available is None and b.notes[0].startswith("RLIMIT_NPROC 0 does not bind")
    b = pids_budget(limits, {}, _facts(**{**none, "threads_max": 30}))
    assert b.to_json() == {"available": 30, "binding": "kernel.threads-max 30", "notes": []}
    b = pids_budget(limits, {}, _facts(**{**none, "pid_max": 400}))
    assert b.to_json() == {"available": 400, "binding": "kernel.pid_max 400", "notes": []}
