"""Every environment variable launcher manages, and why (docs/caps.md).

A leaf: the host readers use it to report what is already set, the caps to set values. GPU
vendors add their own variables (launcher/vendors/).
"""

from __future__ import annotations

CORE: dict[str, str] = {
    # threads (read at library load: must be set before the interpreter starts)
    "OMP_NUM_THREADS": "OpenMP pool (libgomp, torch)",
    "MKL_NUM_THREADS": "MKL pool; beats OMP_NUM_THREADS for MKL and torch",
    "OPENBLAS_NUM_THREADS": "OpenBLAS pool, built at `import numpy`",
    "GOTO_NUM_THREADS": "OpenBLAS fallback; set to the same value so a stale one cannot differ",
    "NUMEXPR_MAX_THREADS": "NumExpr pool size",
    "NUMEXPR_NUM_THREADS": "NumExpr threads used",
    "TF_NUM_INTRAOP_THREADS": "TensorFlow intra-op pool (process_util.cc)",
    "TF_NUM_INTEROP_THREADS": "TensorFlow inter-op pool",
    "PJRT_NPROC": "XLA's CPU client pools (JAX): tf_XLAEigen and the client's (xla/pjrt/utils.cc)",
    "OMP_STACKSIZE": "OpenMP worker stack",
    "GOMP_STACKSIZE": "GNU OpenMP worker stack (KiB)",
    "OMP_MAX_ACTIVE_LEVELS": "nested OpenMP levels (OMP_NESTED is deprecated)",
    "OMP_THREAD_LIMIT": "all OpenMP threads of the process",
    "OMP_NESTED": "deprecated; removed when inherited",
    # tf.data (read by launcher's workloads and by user code through the caps file)
    "LAUNCHER_TF_DATA_PARALLELISM": "tf.data map num_parallel_calls",
    "LAUNCHER_TF_DATA_PREFETCH": "tf.data prefetch buffer",
    "LAUNCHER_TF_DATA_PRIVATE_THREADPOOL": "tf.data private_threadpool_size",
    # a stress run's recommendations (profile `recommended`), read by the built-in workloads
    "LAUNCHER_NUM_ENVS": "stress-jax: num_envs to run when no flag is given",
    "LAUNCHER_VECTORIZED_ENVS": "pytorch-phase3: vectorized_envs when no flag is given",
    "LAUNCHER_BATCH_SIZE": "pytorch-phase3: batch_size when no flag is given",
    # allocators
    "PYTORCH_ALLOC_CONF": "PyTorch allocator (newer name)",
    "PYTORCH_CUDA_ALLOC_CONF": "PyTorch CUDA allocator (older name)",
    "XLA_PYTHON_CLIENT_PREALLOCATE": "JAX GPU preallocation",
    "XLA_CLIENT_MEM_FRACTION": "JAX GPU memory fraction",
    "XLA_PYTHON_CLIENT_MEM_FRACTION": "deprecated; removed when inherited",
    "XLA_PYTHON_CLIENT_ALLOCATOR": "JAX GPU allocator",
}

# Deprecated spellings: removed (with a note) when found in the environment.
DEPRECATED = {
    "OMP_NESTED": "OMP_MAX_ACTIVE_LEVELS",
    "XLA_PYTHON_CLIENT_MEM_FRACTION": "XLA_CLIENT_MEM_FRACTION",
}


def verdict_says(name: str, value: str | None) -> bool:
    """Whether the verdict already names an inherited `name` that launcher replaces with
    `value` (a deprecated variable, removed): its replacement line would say it twice."""
    return name in DEPRECATED and value is None


def managed() -> dict[str, str]:
    """The core variables and every registered vendor's."""
    from launcher.vendors import all_vendors

    out = dict(CORE)
    for vendor in all_vendors():
        out.update(vendor.variables)
    return out


def managed_in(environ: dict[str, str]) -> dict[str, str]:
    """The managed variables present in `environ`."""
    names = managed()
    return {k: v for k, v in environ.items() if k in names}
