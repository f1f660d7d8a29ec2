"""How many threads (= tasks, = pids) one process of each framework starts.

The model counts threads after import and a first operation (a matmul; a jit for JAX), and is
checked against real imports by tests/test_thread_estimate.py. Constants were measured with
numpy 2.x, torch 2.13 CPU, tensorflow-cpu 2.21 and jax 0.10 on Linux x86_64.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ThreadEstimate:
    per_process: int
    breakdown: dict[str, int]


def estimate_threads(framework: str, omp: int, blas: int, intra: int, inter: int,
                     cpus: int) -> ThreadEstimate:
    """Threads of one process. `cpus` is the affinity the process will have (JAX uses it)."""
    parts = {"main": 1, "openblas": blas - 1}  # numpy's OpenBLAS pool: N-1 workers + caller
    if framework == "torch":
        parts["openmp"] = omp - 1  # torch's intra-op pool (libgomp) keeps the caller as worker 0
    elif framework == "tf":
        parts["tf_runtime"] = 4  # fixed: 4 unnamed runtime threads
        parts["tf_intra_op"] = intra - 1
        parts["tf_inter_op"] = inter - 1
    elif framework == "jax":
        # XLA's CPU client keeps a large pool that no variable caps (jax#1539); it scales with
        # the CPUs the process may run on, and only affinity shrinks it.
        parts["xla_runtime"] = 11 + 2 * cpus - (blas - 1) - (1 if intra == 1 else 0)
    parts = {k: v for k, v in parts.items() if v > 0 or k == "main"}
    return ThreadEstimate(sum(parts.values()), parts)
