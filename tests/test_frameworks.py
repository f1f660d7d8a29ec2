"""The frameworks' thread models against what was measured on a GPU host (the H100 of issue
14, recorded in fixtures/h100-threads.json), the rule that an unmeasured version errs high, and
a GPU-side calibration that only ever raises the estimate."""

from __future__ import annotations

import dataclasses
import json

import pytest

from launcher.caps.calibrated import calibrated
from launcher.caps.threads import estimate_threads
from launcher.frameworks import get, names
from launcher.frameworks.base import Installed, Settings
from launcher.probe import probe_host
from tests.conftest import ROOT

HOSTS = ROOT / "tests/fixtures/hosts"

H100 = json.loads((ROOT / "tests/fixtures/h100-threads.json").read_text())
BUILD = {"jax": Installed(H100["versions"]["jax"], "cuda"),
         "torch": Installed(H100["versions"]["torch"], "cuda")}


def auto(cpus: int) -> Settings:
    """The settings `auto` caps give for this many CPUs (what the probe ran with)."""
    from launcher.workloads.calibrate import settings_for

    return Settings.of(settings_for(cpus))


def test_the_cpu_side_is_the_measured_peak():
    m = H100["probe"]["torch"]
    for cpus, seen in zip(m["cpus"], m["no_gpu"], strict=True):
        est = estimate_threads("torch", auto(cpus), cpus=cpus, gpus=0, installed=BUILD["torch"],
                               probe_only=True)
        assert est.per_process == seen, (cpus, est.breakdown)
    m = H100["probe"]["jax"]  # JAX_PLATFORMS=cpu: the CUDA plugin never starts
    for cpus, seen in zip(m["cpus"], m["no_gpu"], strict=True):
        est = estimate_threads("jax", auto(cpus), cpus=cpus, gpus=0,
                               installed=Installed("0.11.2", "cpu"), probe_only=True)
        assert est.per_process == seen, (cpus, est.breakdown)


@pytest.mark.parametrize("framework", ["jax", "torch"])
def test_the_gpu_side_of_the_probe_is_what_calibrate_measured(framework):
    m = H100["probe"][framework]
    for cpus, seen in zip(m["cpus"], m["calibrate_one_gpu"], strict=True):
        est = estimate_threads(framework, auto(cpus), cpus=cpus, gpus=1, installed=BUILD[framework],
                               probe_only=True)
        assert est.per_process == seen, (cpus, est.breakdown)


def test_a_cuda_build_of_jax_with_its_gpus_hidden_starts_its_cuda_thread():
    """As a run hides GPUs (CUDA_VISIBLE_DEVICES=""), the default settings and every thread
    variable at 1: one more thread than JAX_PLATFORMS=cpu, counted by the model."""
    m = H100["probe"]["jax_hidden"]
    for cpus, default, ones in zip(m["cpus"], m["defaults"], m["thread_vars_1"], strict=True):
        probe = estimate_threads("jax", auto(cpus), cpus=cpus, gpus=0, installed=BUILD["jax"],
                                 probe_only=True)
        assert probe.per_process == default
        probe = estimate_threads("jax", Settings(), cpus=cpus, gpus=0, installed=BUILD["jax"],
                                 probe_only=True)
        assert probe.per_process == ones
    with_gpu = estimate_threads("jax", auto(16), cpus=16, gpus=1, installed=BUILD["jax"]).breakdown
    assert "gpu_build" not in with_gpu  # one GPU's 10 threads include `cuda`


@pytest.mark.parametrize("framework", ["jax", "torch"])
def test_the_gpu_side_is_never_below_the_measured_peak(framework):
    m = H100["probe"][framework]
    for key in ("one_gpu", "calibrate_one_gpu"):
        for cpus, seen in zip(m["cpus"], m[key], strict=True):
            est = estimate_threads(framework, auto(cpus), cpus=cpus, gpus=1,
                                   installed=BUILD[framework])
            assert seen <= est.per_process, (key, cpus, est.breakdown)


@pytest.mark.parametrize("workload", sorted(H100["workloads"]))
def test_the_reference_workloads_peak_within_08_to_10_of_the_estimate(workload):
    w = H100["workloads"][workload]
    est = estimate_threads(w["framework"], auto(w["cpus"]), cpus=w["cpus"], gpus=w["gpus"],
                           installed=BUILD[w["framework"]])
    total = est.per_process + 1 + w["extra_threads"]  # + the supervisor, + its own
    for peak in w["peaks"] + w.get("kernel_pids_peak", []):
        assert 0.8 <= peak / total <= 1.0, (peak, total, est.breakdown)


@pytest.mark.parametrize("run", H100["runs"]["stress-jax"], ids=lambda r: f"{r['cpus']}cpu-"
                         f"{r['gpus']}gpu")
def test_stress_jax_on_a_cpu_set_peaks_within_08_to_10_of_the_estimate(run):
    """What a pids limit is set from: the probe's terms and the pools only a real program
    grows (llvm-worker one per CPU), against the run cgroup's own pids.peak."""
    est = estimate_threads("jax", auto(run["cpus"]), cpus=run["cpus"], gpus=run["gpus"],
                           installed=BUILD["jax"])
    total = est.per_process + 1 + 1  # + the supervisor, + stress-jax's sampler
    if run["how"] == "sampled":  # samples 50 ms apart: a lower bound of the peak
        assert run["peak"] <= total, (run, total, est.breakdown)
    else:
        assert 0.8 <= run["peak"] / total <= 1.0, (run, total, est.breakdown)


def test_jax_gpu_terms_name_the_pools():
    parts = estimate_threads("jax", auto(16), cpus=16, gpus=1, installed=BUILD["jax"]).breakdown
    assert parts["gpu_runtime"] == 10  # cuda, cuda-EvtHandlr, py_xla_*, tf_cuda_driver, 4 more
    assert parts["xla_gpu_compile"] == 4  # the GPU compile's llvm-workers the probe reaches
    assert parts["xla_codegen"] == 24  # llvm-worker to one per CPU, CPU and GPU compiles
    assert estimate_threads("jax", auto(2), cpus=2, gpus=4,
                            installed=BUILD["jax"]).breakdown["gpu_runtime"] == 40


def test_a_cpu_build_of_torch_starts_no_cuda_thread():
    cpu = estimate_threads("torch", auto(2), cpus=2, gpus=0,
                           installed=Installed("2.13.0", "cpu")).breakdown
    cuda = estimate_threads("torch", auto(2), cpus=2, gpus=0,
                            installed=Installed("2.11.0+cu130", "cuda")).breakdown
    assert "gpu_build" not in cpu and cuda["gpu_build"] == 1


@pytest.mark.parametrize("framework", ["jax", "torch", "tf", "none"])
@pytest.mark.parametrize("version", ["0.12.0", "9.0", None])
def test_an_unmeasured_version_errs_high(framework, version):
    fw = get(framework)
    for cpus in (1, 2, 16):
        for gpus in (0, 1):
            est = fw.estimate(auto(cpus), cpus, gpus, Installed(version))
            measured = [fw.estimate(auto(cpus), cpus, gpus, Installed(m.series + ".0"))
                        for m in fw.models]
            assert sum(est.parts.values()) >= max(sum(e.parts.values()) for e in measured)
            assert "errs high" in est.source


def test_a_measured_version_says_which():
    est = get("jax").estimate(auto(2), 2, 0, Installed("0.10.2"))
    assert est.source == "built-in model (jax 0.10.2, 1-2 CPUs, 2026-11)"
    assert get("jax").estimate(auto(2), 2, 0, Installed("0.11.2")).parts != est.parts


def test_every_framework_names_its_module_and_pins_its_images():
    for name in names():
        fw = get(name)
        assert fw.name == name and fw.models and fw.probe
        for vendor, lines in fw.requirements.items():
            pins = [x for x in lines if not x.startswith("--")]
            # ROCm builds come from AMD's and PyTorch's own indexes; numpy alone is any version
            if vendor != "amd" and name != "none":
                assert all("==" in x for x in pins), (name, vendor, pins)


def _entry(peak: int, gpus: int, cpus: int = 16) -> dict:  # type: ignore[type-arg]
    return {"framework": "jax", "version": "0.11.2", "cpus": cpus, "peak": peak, "gpus": gpus,
            "settings": auto(cpus).as_dict(), "date": "2026-11-22",
            "vendor": "nvidia", "driver": "580.95", "build": "cuda", "method": 2}


def test_a_gpu_calibration_raises_the_gpu_terms_and_never_lowers_them():
    facts = probe_host(HOSTS / "v2-limited", environ={})
    model = estimate_threads("jax", auto(16), cpus=16, gpus=1, installed=BUILD["jax"]).per_process
    below = dataclasses.replace(facts, calibration=[_entry(86, 0), _entry(99, 1)])
    est = calibrated("jax", auto(16), cpus=16, gpus=1, facts=below, installed=BUILD["jax"])
    assert est.per_process == model  # the probe saw fewer GPU threads: the model stands
    assert "GPU side with 1 nvidia GPU (driver 580.95)" in est.source
    above = dataclasses.replace(facts, calibration=[_entry(86, 0), _entry(99 + 40, 1)])
    raised = calibrated("jax", auto(16), cpus=16, gpus=1, facts=above, installed=BUILD["jax"])
    assert raised.per_process == model + 40  # the probe's GPU side was 99: 40 more seen
    assert raised.breakdown["gpu calibration"] == 40
    # a run that sees no GPU takes the CPU side only, and what only a real program grows
    no_gpu = estimate_threads("jax", auto(16), cpus=16, gpus=0, installed=BUILD["jax"]).per_process
    assert calibrated("jax", auto(16), cpus=16, gpus=0, facts=above,
                      installed=BUILD["jax"]).per_process == no_gpu == 99


def test_a_calibration_never_cancels_what_only_a_real_program_grows():
    """An image's calibration (the version unknown where the estimate is made) is applied to
    its own version's model, not the largest one; a CPU side measured by the older method
    (JAX_PLATFORMS=cpu: no `cuda` thread) is not used."""
    facts = probe_host(HOSTS / "v2-limited", environ={})
    image = dataclasses.replace(facts, calibration=[_entry(86, 0), _entry(99, 1)])
    for gpus, stress_jax_peak in ((0, 98), (1, 119)):
        est = calibrated("jax", auto(16), cpus=16, gpus=gpus, facts=image,
                         installed=Installed(None)).per_process
        assert est + 2 >= stress_jax_peak  # + the supervisor, + stress-jax's sampler
    old = dataclasses.replace(facts, calibration=[{**_entry(85, 0), "method": 1}])
    model = estimate_threads("jax", auto(16), cpus=16, gpus=0, installed=BUILD["jax"])
    assert calibrated("jax", auto(16), cpus=16, gpus=0, facts=old, installed=BUILD["jax"]) == model


@pytest.mark.parametrize(("first", "second", "kept", "probes"),
                         [(-1, 0, 0, 2), (-1, -2, -1, 2), (0, None, 0, 1), (2, None, 2, 1)])
def test_a_probe_below_the_model_is_measured_again_before_it_lowers_anything(
        monkeypatch, first, second, kept, probes):
    """`launcher calibrate`: a peak below the model's figure for the probe (which would lower
    every estimate) is confirmed by a second probe and the higher kept; one at or above the
    model stands alone."""
    from launcher.workloads import calibrate as cal

    model = cal._model("none", 2, gpus=0)
    peaks = iter([model + first] + ([] if second is None else [model + second]))
    seen: list[int] = []

    def probe(framework, cpus, gpu):  # the peak of one probe process, as measure() reads it
        seen.append(next(peaks))
        return {"framework": framework, "cpus": len(cpus), "peak": seen[-1]}

    monkeypatch.setattr(cal, "_probe_peak", probe)
    entry = cal.measure("none", [0, 1])
    assert entry["peak"] == model + kept
    assert len(seen) == probes == entry.get("probes", 1)


def test_a_frameworks_own_count_is_read_back_by_its_name():
    """A calibration entry records each framework's own counts by the names its
    `settings_from` gives them (tf's private_pool, jax's pjrt): read back, each sizes the pool
    it names; absent, the framework's default stands (tf.data's private pool: intra-op's)."""
    shared = {"omp": 2, "blas": 2, "intra": 2, "inter": 2}
    tf = estimate_threads("tf", Settings.of({**shared, "private_pool": 1}), cpus=2,
                          probe_only=True).breakdown
    assert tf["tf_data"] == 1 + 3 * 1
    tf = estimate_threads("tf", Settings.of(shared), cpus=2, probe_only=True).breakdown
    assert tf["tf_data"] == 1 + 3 * 2
    jax = get("jax").estimate(Settings.of({**shared, "pjrt": 3}), 2, 0, Installed("0.10.2"))
    assert jax.parts["xla_eigen"] == 3
    assert Settings.of({**shared, "pjrt": 3, "note": "x"}).as_dict() == {**shared, "pjrt": 3}


def test_calibration_runs_the_probe_under_every_frameworks_own_variables():
    """The probe's environment is the `auto` caps of its CPU count, each registered
    framework's variables as its `environment` gives them; the entry records what they feed
    back into the settings, by the names the frameworks give."""
    from launcher.workloads import calibrate as cal

    env = cal.probe_environment(4)
    assert {k: env[k] for k in ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS",
                                "TF_NUM_INTEROP_THREADS", "LAUNCHER_TF_DATA_PRIVATE_THREADPOOL",
                                "PJRT_NPROC")} == {
        "OMP_NUM_THREADS": "4", "TF_NUM_INTRAOP_THREADS": "4", "TF_NUM_INTEROP_THREADS": "2",
        "LAUNCHER_TF_DATA_PRIVATE_THREADPOOL": "4", "PJRT_NPROC": "4"}
    assert env["XLA_PYTHON_CLIENT_MEM_FRACTION"] is None  # deprecated: removed, as a run does
    assert cal.settings_for(4) == {"omp": 4, "blas": 4, "intra": 4, "inter": 2,
                                   "private_pool": 4, "pjrt": 4}


def test_what_frameworks_share_names_no_framework():
    """The settings every framework reads, the pools each derives its variables from, and
    what a GPU vendor declares name no framework: a framework's own counts are in
    Settings.extra, its own variables in its module (torch's HIP allocator variable from the
    vendor's generic `gpu_build`)."""
    from launcher.frameworks.base import SHARED, Pools
    from launcher.vendors import get as get_vendor
    from launcher.vendors.base import Vendor

    attrs = [*(f.name for f in dataclasses.fields(Settings)),
             *(f.name for f in dataclasses.fields(Pools)), *vars(Vendor)]
    assert [a for a in attrs if set(a.split("_")) & set(names())] == []
    assert [f.name for f in dataclasses.fields(Settings)] == [*SHARED, "extra"]

    def alloc(build: str) -> set[str]:
        pools = Pools(intra=1, intra_src="", inter=1, inter_src="",
                      pick=lambda _k, v, why: (v, why), src=lambda _k: "profile",
                      get=lambda k: "max_split_size_mb:64" if k == "allocator.torch" else None,
                      gpu_build=build)
        return set(get("torch").environment(pools))

    both = {"PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"}
    assert alloc(get_vendor("amd").gpu_build) == both | {"PYTORCH_HIP_ALLOC_CONF"}
    assert alloc(get_vendor("nvidia").gpu_build) == alloc(get_vendor("none").gpu_build) == both
