"""The pure budget: precedence, sources, verdicts."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from launcher.caps.resolve import resolve
from launcher.errors import ProfileError
from launcher.probe import probe_host
from launcher.profiles import load_profile
from tests.conftest import HOSTS
from tests.docker_helpers import profile


@pytest.fixture
def limited():
    return probe_host(HOSTS / "v2-limited", environ={})


def _profile(tmp_path, text, name="p"):
    return load_profile(Path(profile(tmp_path, name, text)))


def test_auto_threads_follow_the_quota(limited):
    caps = resolve(load_profile("base"), limited).caps
    assert caps.cpus == 1  # quota 1.5 rounded down
    env = caps.environment()
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"
    assert env["TF_NUM_INTRAOP_THREADS"] == "1" and env["TF_NUM_INTEROP_THREADS"] == "1"
    assert "quota 1.5 rounded down" in caps.env["OMP_NUM_THREADS"].source
    assert env["OMP_STACKSIZE"] == env["GOMP_STACKSIZE"] == "512k"
    assert env["OMP_MAX_ACTIVE_LEVELS"] == "1"


def test_processes_share_the_cpus(tmp_path):
    facts = probe_host(HOSTS / "v2-unlimited", environ={})  # 8 CPUs
    caps = resolve(load_profile("base"), facts, processes=4).caps
    assert caps.threads["intra_op"] == 2 and "/ 4 processes" in caps.env["OMP_NUM_THREADS"].source


def test_inherited_value_is_replaced_and_reported(limited):
    inherited = {"OMP_NUM_THREADS": "32", "OMP_NESTED": "TRUE",
                 "XLA_PYTHON_CLIENT_MEM_FRACTION": ".5", "CUDA_VISIBLE_DEVICES": "3"}
    caps = resolve(load_profile("base"), limited, inherited=inherited).caps
    omp = caps.env["OMP_NUM_THREADS"]
    assert (omp.value, omp.replaced) == ("1", "32")
    assert caps.env["OMP_NESTED"].value is None and "OMP_NESTED" in caps.removed()
    assert caps.env["XLA_CLIENT_MEM_FRACTION"].value == ".5"  # renamed, not lost
    assert caps.env["XLA_PYTHON_CLIENT_MEM_FRACTION"].value is None
    cuda = caps.env["CUDA_VISIBLE_DEVICES"]
    assert cuda.value == "3" and cuda.source.startswith("inherited")
    assert any("OMP_NESTED=TRUE is deprecated" in r for r in caps.verdict.reasons)


def test_explicit_overrides_win(tmp_path, limited):
    p = _profile(tmp_path, "extends: base\nenv:\n  OMP_NUM_THREADS: 3\n  MY_FLAG: yes\n")
    caps = resolve(p, limited, overrides={"MKL_NUM_THREADS": "5"},
                        inherited={"OMP_NUM_THREADS": "32"}).caps
    assert caps.env["OMP_NUM_THREADS"].value == "3"
    assert caps.env["OMP_NUM_THREADS"].source.startswith("profile env.OMP_NUM_THREADS")
    assert caps.env["OMP_NUM_THREADS"].replaced == "32"
    assert caps.env["MY_FLAG"].value == "true"
    assert caps.env["MKL_NUM_THREADS"].value == "5"
    assert caps.env["MKL_NUM_THREADS"].source == "--env (explicit override)"
    # the estimate uses the values that will really be in force
    assert caps.threads["omp"] == 1 and "openblas" not in caps.estimate.breakdown


def test_pids_refusal_names_the_limit(tmp_path):
    facts = probe_host(HOSTS / "v2-unlimited", environ={})
    p = _profile(tmp_path, "extends: base\nframework: tf\nlimits: {pids: 40}\n"
                           "threads: {intra_op: 4, inter_op: 4}\n")
    caps = resolve(p, facts, processes=5).caps
    assert caps.verdict.level == "refuse"
    per = caps.estimate.per_process
    assert (f"~{5 * per + 1} threads (5 processes x ~{per} + 1 supervisor) would exceed the "
            f"pids limit 40.") in caps.verdict.reasons


def test_cgroup_pids_headroom_binds(limited):
    facts = dataclasses.replace(limited, cgroup=dataclasses.replace(limited.cgroup,
                                                                     pids_current=70))
    caps = resolve(load_profile("runpod"), facts, framework="jax").caps
    assert caps.budget.available == 7
    assert caps.budget.binding == "pids.max 77 of /sys/fs/cgroup/job (pids.current 70)"
    assert caps.verdict.level == "refuse"


def test_rig_memory_budget(limited):
    rig = load_profile("rig-6600")
    caps = resolve(rig, limited).caps
    assert caps.limits["memory"].value == int(7.7 * (1 << 30)) - 3 * (1 << 30)
    assert any("12 processes x 400MiB" in r for r in caps.verdict.reasons)
    # 12 processes, 12 GPUs: each process sees its own (as render and jobs give it), so
    # autograd's device threads and the driver's event handler are 1 each, and (the build
    # unknown under a fixture root) the CUDA or HIP build's own thread
    parts = caps.estimate.breakdown
    assert parts["torch_autograd_device"] == parts["gpu_event_handler"] == 1
    assert parts["gpu_build"] == 1 and caps.estimate.per_process == 4
    assert caps.verdict.level == "warn"  # ~49 threads fit the pids.max 77; memory 90%+
    assert caps.estimate.total == 49 and caps.budget.available == 74
    assert caps.environment()["HSA_OVERRIDE_GFX_VERSION"] == "10.3.0"
    assert caps.environment()["PYTORCH_HIP_ALLOC_CONF"] == "max_split_size_mb:64"


def test_rig_refuses_too_many_big_workers(tmp_path, limited):
    p = _profile(tmp_path, "extends: rig-6600\nworkers: {memory: 700MiB}\n")
    caps = resolve(p, limited).caps
    assert caps.verdict.level == "refuse"
    assert ("12 processes x 700MiB = 8.2GiB exceed the 4.7GiB memory budget; at most 6 fit."
            in caps.verdict.reasons)


def test_ulimits_and_container_limits(limited):
    caps = resolve(load_profile("docker-5gpu"), limited).caps
    assert caps.limits["pids"].value == 7680
    assert caps.limits["shm"].value == 8 << 30
    assert (caps.ulimits["stack"].soft, caps.ulimits["stack"].hard) == (8 << 20, -1)
    assert (caps.ulimits["memlock"].soft, caps.ulimits["memlock"].hard) == (-1, -1)
    env = caps.environment()
    assert env["NVIDIA_VISIBLE_DEVICES"] == "0,1,2,3,4"
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    assert (env["OMP_NUM_THREADS"], env["TF_NUM_INTRAOP_THREADS"],
            env["TF_NUM_INTEROP_THREADS"]) == ("2", "4", "2")
    assert env["LAUNCHER_TF_DATA_PRIVATE_THREADPOOL"] == "8"


def test_a_cpuset_is_a_real_list_within_the_affinity(tmp_path, limited):
    with pytest.raises(ProfileError, match=r"limits.cpuset: must be a CPU list .*'3-1'"):
        _profile(tmp_path, "extends: base\nlimits: {cpuset: '3-1'}\n")
    outside = resolve(_profile(tmp_path, "extends: base\nlimits: {cpuset: '4-11'}\n"),
                      limited).caps.verdict
    assert outside.level == "warn" and (
        "limits.cpuset 4-11 names CPUs this host does not let the workload run on (its "
        "affinity is 0-7): a run here gets only 4 of them.") in outside.reasons
    apart = resolve(_profile(tmp_path, "extends: base\nlimits: {cpuset: '8-9'}\n"),
                    limited).caps.verdict
    assert any(r.endswith("(its affinity is 0-7): a run here fails.") for r in apart.reasons)
    with pytest.raises(ProfileError, match="must be a CPU list"):
        _profile(tmp_path, "extends: base\nlimits: {cpuset: '0-4000000000'}\n")
    inside = resolve(_profile(tmp_path, "extends: base\nlimits: {cpuset: '0-3'}\n"),
                     limited).caps.verdict
    assert not any("cpuset" in r for r in inside.reasons)


def test_a_calibration_corrects_the_cpu_side_and_keeps_the_gpu_terms(limited):
    rig = load_profile("rig-6600")  # torch, 12 GPUs: taken from the profile (another host)
    model = resolve(rig, limited, for_this_host=False).caps.estimate
    entry = {"framework": "torch", "version": "2.13.0", "cpus": limited.affinity_cpus,
             "settings": {"omp": 1, "blas": 1, "intra": 1, "inter": 1, "private_pool": 1},
             "peak": 4, "gpus": 0, "date": "2026-11-22", "method": 2}  # the model's 2, + 2
    facts = dataclasses.replace(limited, calibration=[entry])
    est = resolve(rig, facts, for_this_host=False).caps.estimate
    assert est.source == "calibrated on this host, torch 2.13.0, 2026-11-22"
    assert est.per_process == model.per_process + 2
    assert est.breakdown["torch_autograd_device"] == 1  # the GPU each process sees
