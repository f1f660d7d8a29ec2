"""How many threads (= tasks, = pids) one process of each framework starts, at its peak.

The peak, not the calm: a process is counted from start through import, a first operation,
compilation (a `jit` of a real step) and its first training steps, every millisecond, with
numpy 2.4, torch 2.13 CPU, tensorflow-cpu 2.21 and jax 0.10.2 on Linux x86_64 at 1 and 2 CPUs of
affinity (`launcher calibrate` measures the same on any host). Checked against real imports and
the reference workloads by tests/test_thread_estimate.py. What shapes the model:

- OpenBLAS and torch's intra-op pool never exceed the CPUs in the process's affinity, whatever
  the variable says; TF's pools do (TF_NUM_INTRAOP_THREADS=4 on 2 CPUs starts 4).
- TF: 3 fixed threads (main, one runtime thread, tf_graph_runner), the intra-op pool minus the
  caller, and the inter-op pool (tf_Compute) in full; training (Keras `fit` on tf.data) adds a
  second inter-op pool of 4 for the functions (tf_Compute), one tf.data iterator thread and 3
  per thread of tf.data's private pool (measured: +3 each from 2 to 4; map parallelism alone
  adds none beside it).
- JAX: XLA's CPU client starts 9 + 3 x CPUs threads, and no variable changes that, XLA_FLAGS
  included (jax#1539); compiling a real program (scan, vmap, grad) adds LLVM's codegen workers
  (llvm-worker-N) and XLA's parallel for-each pool (tf_foreach), one each per CPU. Only CPU
  affinity shrinks JAX: 15 threads at 1 CPU, 21 at 2.
- torch: training adds nothing on the CPU (autograd runs on the calling thread and the intra-op
  pool).

GPU terms (not measured: no GPU on the machines that fitted this model; from the sources):
- each process that uses a GPU gets the driver's event thread: NVIDIA's `cuda-EvtHandlr`, ROCm's
  HSA runtime AsyncEventsLoop (ROCR-Runtime core/runtime/runtime.cpp);
- torch's autograd engine starts one thread per visible GPU at the first backward
  (torch/csrc/autograd/engine.cpp, Engine::start_device_threads);
- TF's EventMgr polls each GPU from a thread of its own (tensorflow/core/common_runtime/device/
  device_event_mgr.cc);
- XLA's GPU client runs per-device stream threads (xla/pjrt/gpu/se_gpu_pjrt_client.cc): 2 per
  device counted here.
"""

from __future__ import annotations

from dataclasses import dataclass

MEASURED = "numpy 2.4, torch 2.13, tensorflow-cpu 2.21, jax 0.10.2"
GPU_PER_DEVICE = {"torch": 1, "tf": 1, "jax": 2, "none": 0}


@dataclass(frozen=True)
class ThreadEstimate:
    per_process: int
    breakdown: dict[str, int]
    source: str = f"built-in model (peaks measured with {MEASURED})"


def estimate_threads(framework: str, omp: int, blas: int, intra: int, inter: int,
                     cpus: int, private_pool: int = 1, gpus: int = 0) -> ThreadEstimate:
    """Peak threads of one process; `cpus` is the CPU affinity the process will have,
    `private_pool` tf.data's private threadpool size, `gpus` the GPUs it sees."""
    parts = {"main": 1, "openblas": min(blas, cpus) - 1}
    if framework == "torch":
        parts["torch_intra_op"] = min(omp, cpus) - 1
    elif framework == "tf":
        parts["tf_runtime"] = 2
        parts["tf_intra_op"] = intra - 1
        parts["tf_inter_op"] = inter
        parts["tf_function_inter_op"] = 4
        parts["tf_data"] = 1 + 3 * private_pool
    elif framework == "jax":
        parts["xla_runtime"] = 9 + 3 * cpus
        parts["xla_compile"] = cpus  # llvm-worker-N
        parts["xla_foreach"] = cpus  # tf_foreach
    if gpus:
        parts["gpu_driver (not measured)"] = 1
        parts["gpu_device_threads (not measured)"] = GPU_PER_DEVICE.get(framework, 0) * gpus
    parts = {k: v for k, v in parts.items() if v > 0 or k == "main"}
    return ThreadEstimate(sum(parts.values()), parts)
