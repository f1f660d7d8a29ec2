"""How many threads (= tasks, = pids) one process of each framework starts.

Counted after import and a first operation (a 256x256 matmul; under `jax.jit` for JAX) with
numpy 2.4, torch 2.13 CPU, tensorflow-cpu 2.21 and jax 0.10 on Linux x86_64, and checked against
real imports by tests/test_thread_estimate.py. Findings that shape the model:

- OpenBLAS and torch's intra-op pool never exceed the CPUs in the process's affinity, whatever
  the variable says; TF's pools do (TF_NUM_INTRAOP_THREADS=4 on 2 CPUs starts 4).
- TF: 3 fixed threads (main, one runtime thread, tf_graph_runner), the intra-op pool minus the
  caller, and the inter-op pool (tf_Compute) in full.
- JAX: XLA's CPU client starts 9 + 3 x CPUs threads (fitted at 1 and 2 CPUs of affinity) and no
  variable changes that, XLA_FLAGS included (jax#1539); only CPU affinity shrinks it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ThreadEstimate:
    per_process: int
    breakdown: dict[str, int]


def estimate_threads(framework: str, omp: int, blas: int, intra: int, inter: int,
                     cpus: int) -> ThreadEstimate:
    """Threads of one process; `cpus` is the CPU affinity the process will have."""
    parts = {"main": 1, "openblas": min(blas, cpus) - 1}
    if framework == "torch":
        parts["torch_intra_op"] = min(omp, cpus) - 1
    elif framework == "tf":
        parts["tf_runtime"] = 2
        parts["tf_intra_op"] = intra - 1
        parts["tf_inter_op"] = inter
    elif framework == "jax":
        parts["xla_runtime"] = 9 + 3 * cpus
    parts = {k: v for k, v in parts.items() if v > 0 or k == "main"}
    return ThreadEstimate(sum(parts.values()), parts)
