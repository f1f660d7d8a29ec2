"""Table-driven probe tests over captured and hand-made host trees (tests/fixtures/hosts)."""

from __future__ import annotations

import pytest

from launcher.errors import HostError
from launcher.probe import probe_host
from launcher.probe.cgroup import effective_cpus, parse_cpu_list
from launcher.vendors.amd import gfx_name
from tests.conftest import HOSTS

# fixture: (version, cpu_quota, cpuset, pids_max, pids_current, memory_limit, oom_kills, effective)
CASES = {
    "v2-limited": ("v2", 1.5, 4, 77, 3, 314572800, 2, 1),
    "v2-unlimited": ("v2", None, 8, None, 3, None, 0, 8),
    "v2-nested-stricter": ("v2", 1.0, None, 50, 20, 209715200, None, 1),
    "v2-only-max": ("v2", None, None, None, None, None, None, 8),
    "v1-docker": ("v1", 1.5, 2, 77, 1, 314572800, 0, 1),  # captured: --pids-limit 77 --cpus 1.5
    "v1-nested": ("v1", 2.0, 4, 64, 10, 536870912, 1, 2),
    "hybrid-host": ("hybrid", None, 2, None, None, None, 0, 2),  # this kind of machine, captured
    # the parent's limits bound a leaf that enables no controller (cgroup-v2.rst: interface
    # files exist only where the parent enables the controller)
    "v2-ancestor-only": ("v2", 0.5, None, 30, 7, 268435456, 1, 1),
    # an unrelated cgroup2 mount listed first: the mount that holds our cgroup wins
    "v2-two-mounts": ("v2", 1.5, None, 60, 5, 536870912, None, 1),
    "empty": ("none", None, None, None, None, None, None, 1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_cgroup_facts(name):
    version, quota, cpuset, pids_max, pids_cur, mem, oom, eff = CASES[name]
    facts = probe_host(HOSTS / name, environ={})
    cg = facts.cgroup
    assert (cg.version, cg.cpu_quota, cg.cpuset_cpus) == (version, quota, cpuset)
    assert (cg.pids_max, cg.pids_current) == (pids_max, pids_cur)
    assert (cg.memory_limit, cg.oom_kills) == (mem, oom)
    assert facts.effective_cpus == eff


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("v2-malformed", "malformed cpu.max line 'lots of cpu'"),
        ("v2-zero-period", "CPU period is 0"),
        ("v2-one-field", "cpu.max has a quota but no period: '150000'"),
    ],
)
def test_malformed_files_quote_the_line(name, message):
    with pytest.raises(HostError, match=message) as info:
        probe_host(HOSTS / name, environ={})
    assert str(HOSTS / name) in str(info.value)


def test_limits_and_kernel_from_fixture():
    facts = probe_host(HOSTS / "v2-limited", environ={"OMP_NUM_THREADS": "32", "HOME": "/x"})
    assert facts.rlimits["nproc"].soft == 4096
    assert facts.rlimits["stack"].soft == 8388608 and facts.rlimits["stack"].hard is None
    assert facts.rlimits["nofile"].hard == 524288
    assert (facts.threads_max, facts.pid_max, facts.max_map_count) == (63704, 4194304, 65530)
    assert facts.uid == 1000 and facts.uid_tasks == 5
    assert facts.affinity_cpus == 8 and facts.online_cpus == 8
    assert facts.mem_total == 16318412 * 1024
    assert facts.env == {"OMP_NUM_THREADS": "32"}  # only managed variables are reported


def test_live_host_reads_real_values():
    facts = probe_host("/")
    with open("/proc/sys/kernel/threads-max") as f:
        assert facts.threads_max == int(f.read())
    with open("/proc/sys/vm/max_map_count") as f:
        assert facts.max_map_count == int(f.read())
    import resource

    assert facts.rlimits["nproc"].soft == resource.getrlimit(resource.RLIMIT_NPROC)[0]
    # counted where RLIMIT_NPROC binds; root, whom the kernel exempts, is spared the /proc walk
    assert facts.uid_tasks is None if facts.nproc_exempt else facts.uid_tasks >= 1


def test_cpu_rounding_is_down_with_minimum_one():
    assert effective_cpus(32, None, 2.0) == 2
    assert effective_cpus(32, None, 1.5) == 1
    assert effective_cpus(32, None, 0.5) == 1
    assert effective_cpus(32, 4, 8.0) == 4
    assert effective_cpus(2, None, None) == 2


def test_cpu_rounding_half_up_is_passed_in():
    assert effective_cpus(32, None, 1.5, "half-up") == 2
    assert effective_cpus(32, None, 1.4, "half-up") == 1
    assert effective_cpus(32, None, 0.3, "half-up") == 1
    assert effective_cpus(2, None, 3.5, "half-up") == 2  # never above the affinity
    with pytest.raises(ValueError, match="rounding must be one of"):
        effective_cpus(2, None, 1.5, "up")


def test_cpu_list_and_gfx():
    assert parse_cpu_list("0-3,8,10-11") == 7
    assert gfx_name(100302) == "gfx1032"
    assert gfx_name(90010) == "gfx90a"
    with pytest.raises(HostError):
        parse_cpu_list("0-x")


def test_amd_topology(tmp_path):
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/kfd").write_text("")
    nodes = tmp_path / "sys/class/kfd/kfd/topology/nodes"
    (nodes / "0").mkdir(parents=True)
    (nodes / "0/properties").write_text("cpu_cores_count 4\nsimd_count 0\n")
    for i, minor in ((1, 128), (2, 129)):
        (nodes / f"{i}/mem_banks/0").mkdir(parents=True)
        (nodes / f"{i}/properties").write_text(
            f"simd_count 56\ngfx_target_version 100302\ndrm_render_minor {minor}\n")
        (nodes / f"{i}/mem_banks/0/properties").write_text("size_in_bytes 8573157376\n")
        (nodes / f"{i}/name").write_text("navi23\n")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/group").write_text("video:x:44:\nrender:x:105:\n")
    facts = probe_host(tmp_path, environ={})
    assert [(g.vendor, g.gfx_target, g.render_node) for g in facts.gpus] == [
        ("amd", "gfx1032", "/dev/dri/renderD128"), ("amd", "gfx1032", "/dev/dri/renderD129")]
    assert facts.groups == {"video": 44, "render": 105}


def test_nvidia_proc(tmp_path):
    d = tmp_path / "proc/driver/nvidia/gpus/0000:01:00.0"
    d.mkdir(parents=True)
    (d / "information").write_text("Model: \t\t NVIDIA GeForce GTX 1650\nIRQ: 1\n")
    facts = probe_host(tmp_path, environ={})
    assert [(g.vendor, g.model) for g in facts.gpus] == [("nvidia", "NVIDIA GeForce GTX 1650")]


def test_tasks_running_from_loadavg(tmp_path):
    """/proc/loadavg's 4th field is running/total tasks: the total is what threads-max and
    pid_max count; no file (an older capture) is None, a malformed one names the file."""
    from tests.host_trees import host

    assert probe_host(host(tmp_path / "a", {"proc/loadavg": "0.52 0.58 0.59 3/124 15333\n"}),
                      environ={}).tasks == 124
    assert probe_host(HOSTS / "v2-limited", environ={}).tasks is None
    bad = host(tmp_path / "b", {"proc/loadavg": "0.52 0.58 0.59 124 15333\n"})
    with pytest.raises(HostError, match=r"proc/loadavg: malformed line .*running/total"):
        probe_host(bad, environ={})

