"""Every environment variable launcher manages, and why (docs/caps.md).

A leaf: the host readers use it to report what is already set, the caps to set values. The
shared pools (OpenMP, MKL, OpenBLAS, NumExpr) are here; each framework and GPU vendor adds its
own variables (`variables` on the entry).
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
    "OMP_STACKSIZE": "OpenMP worker stack",
    "GOMP_STACKSIZE": "GNU OpenMP worker stack (KiB)",
    "OMP_MAX_ACTIVE_LEVELS": "nested OpenMP levels (OMP_NESTED is deprecated)",
    "OMP_THREAD_LIMIT": "all OpenMP threads of the process",
    "OMP_NESTED": "deprecated; removed when inherited",
}

# The shared pools a reader checks first, by their short names on a run's first line (each
# framework adds its own: `pool_labels` on the entry).
POOL_LABELS = {"OMP_NUM_THREADS": "OMP", "MKL_NUM_THREADS": "MKL",
               "OPENBLAS_NUM_THREADS": "OpenBLAS"}

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
    """The core variables and every registered framework's, vendor's and workload's."""
    from launcher.frameworks import get as get_framework
    from launcher.frameworks import names as framework_names
    from launcher.registry import Registry
    from launcher.vendors import all_vendors

    out = dict(CORE)
    for framework in (get_framework(n) for n in framework_names()):
        out.update(framework.variables)
    for vendor in all_vendors():
        out.update(vendor.variables)
    for workload in Registry("workload", group="launcher.workloads",
                             default="WORKLOAD").loaded():
        out.update(workload.variables)
    return out


def managed_in(environ: dict[str, str]) -> dict[str, str]:
    """The managed variables present in `environ`."""
    names = managed()
    return {k: v for k, v in environ.items() if k in names}
