"""Every environment variable launcher manages, and why (FIELD.md facts 6-12, 17-18)."""

from __future__ import annotations

MANAGED: dict[str, str] = {
    # threads (read at library load: must be set before the interpreter starts)
    "OMP_NUM_THREADS": "OpenMP pool (libgomp, torch)",
    "MKL_NUM_THREADS": "MKL pool; beats OMP_NUM_THREADS for MKL and torch",
    "OPENBLAS_NUM_THREADS": "OpenBLAS pool, built at `import numpy`",
    "GOTO_NUM_THREADS": "OpenBLAS fallback; set to the same value so a stale one cannot differ",
    "NUMEXPR_MAX_THREADS": "NumExpr pool size",
    "NUMEXPR_NUM_THREADS": "NumExpr threads used",
    "TF_NUM_INTRAOP_THREADS": "TensorFlow intra-op pool (process_util.cc)",
    "TF_NUM_INTEROP_THREADS": "TensorFlow inter-op pool",
    "OMP_STACKSIZE": "OpenMP worker stack",
    "GOMP_STACKSIZE": "GNU OpenMP worker stack (KiB)",
    "OMP_MAX_ACTIVE_LEVELS": "nested OpenMP levels (OMP_NESTED is deprecated)",
    "OMP_THREAD_LIMIT": "all OpenMP threads of the process",
    "OMP_NESTED": "deprecated; removed when inherited",
    # tf.data (read by launcher's workloads and by user code through the caps file)
    "LAUNCHER_TF_DATA_PARALLELISM": "tf.data map num_parallel_calls",
    "LAUNCHER_TF_DATA_PREFETCH": "tf.data prefetch buffer",
    "LAUNCHER_TF_DATA_PRIVATE_THREADPOOL": "tf.data private_threadpool_size",
    # allocators
    "PYTORCH_ALLOC_CONF": "PyTorch allocator (newer name)",
    "PYTORCH_CUDA_ALLOC_CONF": "PyTorch CUDA allocator (older name)",
    "PYTORCH_HIP_ALLOC_CONF": "PyTorch ROCm allocator",
    "XLA_PYTHON_CLIENT_PREALLOCATE": "JAX GPU preallocation",
    "XLA_CLIENT_MEM_FRACTION": "JAX GPU memory fraction",
    "XLA_PYTHON_CLIENT_MEM_FRACTION": "deprecated; removed when inherited",
    "XLA_PYTHON_CLIENT_ALLOCATOR": "JAX GPU allocator",
    # vendors
    "NVIDIA_VISIBLE_DEVICES": "GPUs the NVIDIA runtime exposes",
    "NVIDIA_DRIVER_CAPABILITIES": "driver libraries mounted (compute,utility)",
    "CUDA_VISIBLE_DEVICES": "GPUs CUDA sees",
    "ROCR_VISIBLE_DEVICES": "GPUs ROCm sees",
    "HIP_VISIBLE_DEVICES": "GPUs HIP sees",
    "HSA_OVERRIDE_GFX_VERSION": "ROCm ISA override (10.3.0 for gfx1032)",
}

# Deprecated spellings: removed (with a note) when found in the environment.
DEPRECATED = {
    "OMP_NESTED": "OMP_MAX_ACTIVE_LEVELS",
    "XLA_PYTHON_CLIENT_MEM_FRACTION": "XLA_CLIENT_MEM_FRACTION",
}
