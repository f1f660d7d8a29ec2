"""The profile contract: every key, its type, and whether `auto` or `unlimited` is allowed.

Kept declarative so the key table of docs/profiles.md, validation and did-you-mean all come
from one place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

AUTO = "auto"
UNLIMITED = "unlimited"


@dataclass(frozen=True)
class Key:
    kind: str  # int | float | size | str | bool | choice | strlist | env
    doc: str
    auto: bool = False
    unlimited: bool = False
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] = ()
    minimum: float = 1
    maximum: float | None = None


    known: Callable[[object], bool] | None = None  # membership without listing (registries)

    def allowed(self) -> tuple[str, ...]:
        return self.choices() if callable(self.choices) else self.choices

    def accepts(self, value: object) -> bool:
        return self.known(value) if self.known is not None else value in self.allowed()


def framework_names() -> tuple[str, ...]:
    from launcher.frameworks import names

    return names()


def _framework_known(value: object) -> bool:
    from launcher.frameworks import known

    return isinstance(value, str) and known(value)


def _vendor_choices() -> tuple[str, ...]:
    from launcher.vendors import names

    return (*names(), AUTO)


def _vendor_known(value: object) -> bool:
    from launcher.vendors import known

    return value == AUTO or (isinstance(value, str) and known(value))


SCHEMA: dict[str, Key | dict[str, Key]] = {
    "name": Key("str", "profile name; must equal the file name"),
    "extends": Key("str", "parent profile (name or path); merged key by key, any depth"),
    "description": Key("str", "one line for `launcher profiles list`"),
    "framework": Key("choice", "default framework", choices=framework_names,
                     known=_framework_known),
    "hardware": {
        "cpus": Key("int", "host CPUs", auto=True),
        "memory": Key("size", "host RAM", auto=True),
        "reserved_memory": Key("size", "RAM kept back for the OS and drivers (ROCm, CUDA)"),
    },
    "gpu": {
        "vendor": Key("choice", "GPU vendor (launcher/vendors/), or auto",
                      choices=_vendor_choices, known=_vendor_known),
        "count": Key("int", "GPUs to use", auto=True, minimum=0),
        "model": Key("str", "GPU model, informative"),
        "memory": Key("size", "memory per GPU", auto=True),
        "gfx_version": Key("str", "AMD: HSA_OVERRIDE_GFX_VERSION (10.3.0 for gfx1032, RX 6600)"),
        "driver_capabilities": Key("str", "NVIDIA: NVIDIA_DRIVER_CAPABILITIES"),
    },
    "limits": {
        "pids": Key("int", "cgroup pids limit (threads count)", auto=True, unlimited=True),
        "nproc": Key("int", "RLIMIT_NPROC soft limit", auto=True, unlimited=True),
        "nofile": Key("int", "RLIMIT_NOFILE soft limit", auto=True),
        "stack": Key("size", "RLIMIT_STACK soft limit = default thread stack", auto=True,
                     unlimited=True),
        "memlock": Key("size", "RLIMIT_MEMLOCK", unlimited=True),
        "memory": Key("size", "memory limit of the container (all processes)", auto=True),
        "shm": Key("size", "/dev/shm size"),
        "cpus": Key("float", "CPU quota in CPUs", auto=True, minimum=0.01),
        "cpuset": Key("cpulist", "CPUs the workload may run on, e.g. 0-3 or 0,2 (its "
                                 "affinity; the pools are sized for them)"),
        "require": Key("bool", "every pids, memory and CPU limit asked for is enforced by the "
                               "kernel, or nothing runs (as run --require-limits; an image's "
                               "entrypoint too)"),
        "fit": Key("bool", "where the pre-flight refuses, shrink the pools to fit (as run "
                           "--fit) instead of refusing; an image's entrypoint too"),
    },
    "threads": {
        "intra_op": Key("int", "threads per op pool: OMP, MKL, OpenBLAS, TF intra, torch",
                        auto=True),
        "inter_op": Key("int", "TF / torch inter-op pool", auto=True),
        "omp_stack": Key("size", "OMP_STACKSIZE / GOMP_STACKSIZE"),
        "max_active_levels": Key("int", "OMP_MAX_ACTIVE_LEVELS"),
        "omp": Key("int", "OpenMP, MKL, OpenBLAS, NumExpr pools (default: intra_op)", auto=True),
        "omp_thread_limit": Key("int", "OMP_THREAD_LIMIT", auto=True),
        "data_parallelism": Key("int", "tf.data map num_parallel_calls", auto=True),
        "prefetch": Key("int", "tf.data prefetch buffer", auto=True),
        "private_threadpool_size": Key("int", "tf.data private_threadpool_size", auto=True),
    },
    "allocator": {
        "torch": Key("str", "PYTORCH_ALLOC_CONF (and CUDA/HIP variants)"),
        "xla_preallocate": Key("bool", "XLA_PYTHON_CLIENT_PREALLOCATE"),
        "xla_mem_fraction": Key("float", "XLA_CLIENT_MEM_FRACTION", minimum=0.01, maximum=1.0),
        "xla_allocator": Key("choice", "XLA_PYTHON_CLIENT_ALLOCATOR",
                             choices=("default", "platform", "bfc", "cuda_async")),
    },
    "workers": {
        "processes": Key("int", "processes sharing one container's budget"),
        "memory": Key("size", "expected peak RSS of one process (a job's chunk: its memory "
                              "limit)"),
    },
    "jobs": {
        "chunk_size": Key("int", "items per chunk when a job spec says `auto`"),
        "max_concurrent": Key("int", "chunks at once on this machine (the node's cap)"),
        "safety": Key("float", "share of the usable memory a job may plan for (default 0.8)",
                      minimum=0.05, maximum=1.0),
    },
    "recommended": {
        "num_envs": Key("int", "stress-jax: the environments it runs by default (written by "
                               "`launcher run stress-jax --write-profile`)"),
        "vectorized_envs": Key("int", "pytorch-phase3: vectorized environments by default"),
        "batch_size": Key("int", "pytorch-phase3: batch size by default"),
    },
    "image": {
        "base": Key("str", "base image; overridable with --base-image"),
        "apt_packages": Key("strlist", "extra Debian/Ubuntu packages"),
        "pip_packages": Key("strlist", "extra Python packages"),
    },
    "env": Key("env", "explicit variables; win over everything"),
}


def walk_schema() -> list[tuple[str, Key]]:
    """(dotted key, Key) for every leaf, in schema order."""
    out: list[tuple[str, Key]] = []
    for name, spec in SCHEMA.items():
        if isinstance(spec, dict):
            out.extend((f"{name}.{sub}", key) for sub, key in spec.items())
        else:
            out.append((name, spec))
    return out
