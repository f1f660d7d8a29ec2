"""JAX: XLA's CPU client sizes two pools (tf_XLAEigen, its own) from PJRT_NPROC, else NPROC,
else the CPUs in the affinity (xla/pjrt/utils.cc, tsl's port.cc); its codegen pools
(llvm-worker, tf_foreach, the CPU codegen) follow the affinity only. The caps set PJRT_NPROC
to the pool size (`threads.intra_op`); a budget shrinks it first, then the affinity."""

from __future__ import annotations

from collections.abc import Callable

from launcher.frameworks.base import (
    Framework,
    Installed,
    Model,
    Parts,
    Pools,
    Settings,
    Want,
    openblas,
)
from launcher.keys import Key
from launcher.threadpools import ThreadPool

PJRT = "pjrt"  # its Settings count: PJRT_NPROC (0 or absent: unset, the pools follow the affinity)


def _xla(s: Settings, cpus: int) -> int:
    """The threads XLA's CPU client sizes its pools for: PJRT_NPROC, else the CPUs."""
    pjrt = s.count(PJRT, 0)
    return max(pjrt, 1) if pjrt else cpus


def _gpu_build(installed: Installed) -> Parts:
    # A CUDA build with no GPU visible (CUDA_VISIBLE_DEVICES="", as a run hides them) still
    # starts its plugin's `cuda` thread: 86 where JAX_PLATFORMS=cpu gives 85 (jax 0.11.2,
    # 16 CPUs of an H100 host, 2026-11-23). A build whose kind is unknown counts it: errs high.
    return {"gpu_build": 1} if installed.build in ("cuda", "rocm", "unknown") else {}


def _cpu_0_10(s: Settings, cpus: int, installed: Installed) -> Parts:
    # jax 0.10.2 at 1 and 2 CPUs, PJRT_NPROC unset and 0-16 (2026-11-23, thread names and the
    # kernel's pids.peak; xla/pjrt/utils.cc DefaultThreadPoolSize): the CPU client starts n
    # tf_XLAEigen and n client threads (n = PJRT_NPROC, else the CPUs) and 8 compiler threads
    # whatever n is; its first compile a slow-operation alarm and min(A, 32) codegen threads;
    # a training step llvm-worker-N and tf_foreach, one each per CPU. The peak: 10 + 2n + 3A.
    n = _xla(s, cpus)
    return {**openblas(s, cpus), "xla_runtime": n + 9, "xla_eigen": n,
            "xla_cpu_codegen": min(cpus, 32), "xla_compile": cpus, "xla_foreach": cpus,
            **_gpu_build(installed)}


def _cpu_0_11(s: Settings, cpus: int, installed: Installed) -> Parts:
    # jax 0.11.2 on 1/2/4/8/16 CPUs of an H100 host (issue 14, 2026-11): the probe peaks at
    # 7/13/25/45/85 = 1 + 5 x CPUs + min(CPUs, 4): the client 2 x CPUs + 1 beside OpenBLAS's
    # pool, tf_XLAEigen and tf_foreach one per CPU, llvm-worker at most 4 for its small program.
    # PJRT_NPROC was not measured on 0.11: the pools it sizes on 0.10 (tf_XLAEigen, the
    # client's) grow with it above the CPUs and are never counted below them (errs high).
    n = max(_xla(s, cpus), cpus)
    return {**openblas(s, cpus), "xla_runtime": n + cpus + 1, "xla_eigen": n,
            "xla_compile": min(cpus, 4), "xla_foreach": cpus, **_gpu_build(installed)}


def _gpu(cpus: int, gpus: int) -> Parts:
    # One H100, jax 0.11.2 (CUDA 13): +10 at every CPU count (cuda, cuda-EvtHandlr,
    # py_xla_callback, py_xla_cleanup, py_xla_execute, tf_cuda_driver and 4 unnamed), counted
    # per GPU (more GPUs not measured: errs high); the build's `cuda` thread is one of them.
    # Compiling for the GPU starts its own llvm-workers: the probe peaks at 18/25/39/59/99.
    return {"gpu_build": 0, "gpu_runtime": 10 * gpus, "xla_gpu_compile": min(cpus, 4)}


def _beyond_probe_0_11(cpus: int, gpus: int) -> Parts:
    # stress-jax --phase 1 on the same host (2026-11-23, thread names at its peak, sampled
    # every 2 ms; the run cgroup's pids.peak): a real program's codegen grows llvm-worker to
    # one per CPU (4/8/13 at 4/8/16 CPUs; 26 with a GPU at 16), and the client one more thread.
    # Peaks 29/53/98 with no GPU against 29/53/101 estimated, 119 with one against 126.
    extra = cpus - min(cpus, 4)
    return {"xla_codegen": extra + (extra if gpus else 0), "xla_program": 1}


def _beyond_probe_0_10(cpus: int, gpus: int) -> Parts:
    # jax 0.10's CPU terms already count llvm-worker one per CPU; its GPU side is 0.11's
    # (not measured on 0.10): the GPU compile's llvm-workers grow to one per CPU too
    return {"xla_codegen": cpus - min(cpus, 4)} if gpus else {}


def detect_build() -> str:
    """cuda or rocm when a GPU plugin is installed beside jaxlib, else cpu (no import)."""
    import importlib.util

    for module, build in (("jax_cuda13_plugin", "cuda"), ("jax_cuda12_plugin", "cuda"),
                          ("jax_rocm7_plugin", "rocm"), ("jax_rocm60_plugin", "rocm")):
        if importlib.util.find_spec(module) is not None:
            return build
    return "cpu"


def first_op() -> None:
    import jax
    import jax.numpy as jnp

    a = jnp.ones((256, 256))
    float(jax.jit(lambda x: (x @ x).sum())(a))


def train() -> None:
    """A compiled training step of scan, vmap and grad (what compilation and the first steps
    start: LLVM's codegen workers, the for-each pool), then a few steps."""
    import jax
    import jax.numpy as jnp

    def rollout(w, x):  # type: ignore[no-untyped-def]
        def step(h, _):  # type: ignore[no-untyped-def]
            h = jnp.tanh(h @ w)
            return h, h.sum()

        return jax.lax.scan(step, x, None, length=50)[1].mean()

    def loss(w, xs):  # type: ignore[no-untyped-def]
        return jax.vmap(rollout, in_axes=(None, 0))(w, xs).mean()

    update = jax.jit(lambda w, xs: w - 0.01 * jax.grad(loss)(w, xs))
    w = jnp.eye(32) * 0.5
    for i in range(20):
        w = update(w, jax.random.normal(jax.random.PRNGKey(i), (256, 32)))
    jax.block_until_ready(w)


def matmul(n: int) -> Callable[[], object]:
    import jax
    import jax.numpy as jnp

    a = jnp.ones((n, n))
    f = jax.jit(lambda x: x @ x)
    return lambda: f(a).block_until_ready()


def _environment(p: Pools) -> Want:
    want: Want = {"PJRT_NPROC": (str(p.intra), p.intra_src),
                   "XLA_PYTHON_CLIENT_MEM_FRACTION": (None, "deprecated (use "
                                                            "XLA_CLIENT_MEM_FRACTION)")}
    pre = p.get("allocator.xla_preallocate")
    if pre is not None:
        want["XLA_PYTHON_CLIENT_PREALLOCATE"] = ("true" if pre else "false",
                                                 p.src("allocator.xla_preallocate"))
    frac = p.get("allocator.xla_mem_fraction")
    if frac is not None:
        want["XLA_CLIENT_MEM_FRACTION"] = (f"{frac:g}", p.src("allocator.xla_mem_fraction"))
    alloc = p.get("allocator.xla_allocator")
    if alloc is not None:
        want["XLA_PYTHON_CLIENT_ALLOCATOR"] = (alloc, p.src("allocator.xla_allocator"))
    return want


FRAMEWORK = Framework(
    # measured on an H200 (jax 0.11.2) and these CPUs, 2026-11-26: XLA names its Eigen pool
    # and its GPU client's threads; most of its other threads are unnamed
    thread_pools=(
        ThreadPool(r"tf_XLAEigen", "XLA Eigen"),
        ThreadPool(r"tf_cuda_driver", "XLA CUDA driver"),
        ThreadPool(r"py_xla_", "XLA execute"),
        ThreadPool(r"llvm-worker", "XLA compiler (LLVM)",
                   "reuse jitted functions rather than compile new ones each cycle "
                   "(jax.clear_caches() frees the compile cache)"),
        ThreadPool(r"tf_foreach", "XLA foreach"),
        ThreadPool(r"tf_pjrt", "XLA PJRT"),
        ThreadPool(r"tf_PjRtCompiler|tf_xla-cpu-code", "XLA compiler"),
        ThreadPool(r"tf_XLAPjRtCpuCl", "XLA CPU client"),
    ),
    loaded_from="jaxlib",
    unnamed_pools=("XLA's compiler and CPU-client pools (tf_PjRtCompilerThreadPool, "
                   "tf_XLAPjRtCpuClient) and its execute threads"),
    growth_fix=("reuse jitted functions rather than compile new ones each cycle (a new "
                "shape or closure compiles again; jax.clear_caches() frees the cache), and "
                "drop each cycle's arrays, or run each cycle in a fresh process"),
    name="jax", label="jax", module="jax", distributions=("jax",), install="jax",
    marks=("jaxlib", "flax", "optax", "equinox", "haiku"),
    models=(Model("0.10", "jax 0.10.2, 1-2 CPUs, 2026-11", _cpu_0_10, _gpu,
                  _beyond_probe_0_10),
            Model("0.11", "jax 0.11.2 with CUDA 13, 1-16 CPUs, one H100, 2026-11",
                  _cpu_0_11, _gpu, _beyond_probe_0_11)),
    # 0.10.2: the newest on PyPI that the model covers (0.11.2 was measured from a GPU host's
    # own install); it needs Python 3.11 or newer
    requirements={"nvidia": ["jax[cuda13]==0.10.2"], "none": ["jax==0.10.2"]},
    # jax has no `rocm` extra: jax[rocm] installed the CPU jaxlib, silently
    unsupported={"amd": "jax 0.10 has no `rocm` extra, and its ROCm plugin on PyPI "
                        "(jax-rocm7-plugin) needs ROCm 7, where the AMD base is ROCm 6.4.1"},
    facts=("PJRT_NPROC sizes XLA's CPU client pools (tf_XLAEigen, the client's); its "
           "codegen pools (llvm-worker, tf_foreach) follow the CPU affinity",),
    probe=__name__,
    detect_build=detect_build,
    affinity_bound="PJRT_NPROC",
    profile_keys={"allocator": {
        "xla_preallocate": Key("bool", "XLA_PYTHON_CLIENT_PREALLOCATE"),
        "xla_mem_fraction": Key("float", "XLA_CLIENT_MEM_FRACTION", minimum=0.01, maximum=1.0),
        "xla_allocator": Key("choice", "XLA_PYTHON_CLIENT_ALLOCATOR",
                             choices=("default", "platform", "bfc", "cuda_async"))}},
    variables={
        "PJRT_NPROC": "XLA's CPU client pools (JAX): tf_XLAEigen and the client's "
                      "(xla/pjrt/utils.cc)",
        "XLA_PYTHON_CLIENT_PREALLOCATE": "JAX GPU preallocation",
        "XLA_CLIENT_MEM_FRACTION": "JAX GPU memory fraction",
        "XLA_PYTHON_CLIENT_MEM_FRACTION": "deprecated; removed when inherited",
        "XLA_PYTHON_CLIENT_ALLOCATOR": "JAX GPU allocator"},
    environment=_environment,
    settings_from={PJRT: "PJRT_NPROC"},
)
