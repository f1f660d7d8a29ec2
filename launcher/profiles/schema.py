"""The profile contract: every key, its type, and whether `auto` or `unlimited` is allowed.

launcher's own keys are here; each GPU vendor and framework adds its own (`profile_keys` on the
entry: AMD's gpu.gfx_version, TensorFlow's tf.data pools, the allocators). Kept declarative, so
the key table of docs/profiles.md, validation and did-you-mean all come from SCHEMA.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Iterator, Mapping
from typing import Any

from launcher.keys import AUTO, UNLIMITED, Key
from launcher.profiles.image_keys import (
    apt_names_problem,
    image_ref_problem,
    pip_requirements_problem,
)

__all__ = ["AUTO", "SCHEMA", "UNLIMITED", "Key", "walk_schema"]


def workloads() -> list[Any]:
    """The registered workloads (launcher.workloads.workload.Workload), loaded."""
    from launcher.registry import Registry

    return Registry("workload", group="launcher.workloads", default="WORKLOAD").loaded()


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


def _regex_problem(value: object) -> str | None:
    """Why growth.cycle cannot mark cycles (the image's entrypoint validates profiles too:
    the re module alone, as launcher/telemetry/cycles.py's compile_pattern)."""
    import re

    try:
        pattern = re.compile(str(value))
    except re.error as exc:
        return f"not a regular expression: {exc}"
    if pattern.search("") is not None:
        return "it matches an empty line, so every line would mark a cycle"
    return None


BASE: dict[str, Key | dict[str, Key]] = {
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
        "override": Key("bool", "run a workload the pre-flight refuses anyway (an informed "
                                "override, as run --override: the start line, summary.json "
                                "and the diagnosis say so, with the plan's reasons); "
                                "limits.require still refuses a limit the kernel cannot keep"),
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
    },
    "allocator": {},  # the frameworks' allocators
    "workers": {
        "processes": Key("int", "processes sharing one container's budget"),
        "memory": Key("size", "expected peak RSS of one process (a job's chunk: its memory "
                              "limit)"),
        "threads": Key("int", "peak threads of one process, measured (`launcher run "
                              "--write-profile`): the estimate takes it in place of the model"),
    },
    "jobs": {
        "chunk_size": Key("int", "items per chunk when a job spec says `auto`"),
        "max_concurrent": Key("int", "chunks at once on this machine (the node's cap)"),
        "safety": Key("float", "share of the usable memory a job may plan for (default 0.8)",
                      minimum=0.05, maximum=1.0),
    },
    "growth": {
        "cycle": Key("str", "what marks a cycle in the workload's output: a regular "
                            "expression whose first group is its number (default: any line "
                            "that repeats with a number counting up, familiar words such as "
                            "fold N, Epoch N/M, iteration N first); as run --cycle",
                     check=_regex_problem),
        "window": Key("float", "fixed seconds that stand in for a cycle where no output line "
                               "marks one (default: windows that suit the run's length, a "
                               "second at first, longer as it runs)", minimum=1),
        "stop": Key("bool", "stop the workload at the start of the cycle that growth would take "
                            "past a limit (SIGTERM, then SIGKILL after 10 s; exit status 75); as "
                            "run --stop-before-limit"),
    },
    "image": {
        "base": Key("str", "base image; overridable with --base-image",
                    check=image_ref_problem),
        "apt_packages": Key("strlist", "extra Debian/Ubuntu packages", check=apt_names_problem),
        "pip_packages": Key("strlist", "extra Python packages, one PEP 508 requirement each",
                            check=pip_requirements_problem),
    },
    "env": Key("env", "explicit variables; win over everything"),
}


def contributions() -> list[tuple[str, dict[str, dict[str, Key]]]]:
    """(whose, keys by section) of each vendor (under gpu), framework and workload (the
    entry-point groups'), in registry order: "vendor amd", "workload stress-jax"."""
    from launcher.frameworks import get as get_framework
    from launcher.vendors import all_vendors

    out = [(f"vendor {v.name}", {"gpu": v.profile_keys}) for v in all_vendors()]
    out += [(f"framework {n}", get_framework(n).profile_keys) for n in framework_names()]
    out += [(f"workload {w.name}", w.profile_keys) for w in workloads()]
    return out


@functools.lru_cache(maxsize=None)
def composed() -> dict[str, Key | dict[str, Key]]:
    """launcher's keys, then the plugins' (contributions), in registry order."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in BASE.items()}
    for _, keys in contributions():
        for section, more in keys.items():
            here = out.setdefault(section, {})
            assert isinstance(here, dict), section
            here.update(more)
    return out


class _Schema(typing.Mapping[str, "Key | dict[str, Key]"]):  # typing's: 3.8 subscripts it
    """SCHEMA, composed when first read (the vendors' and frameworks' modules load then)."""

    def __getitem__(self, key: str) -> Key | dict[str, Key]:
        return composed()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(composed())

    def __len__(self) -> int:
        return len(composed())


SCHEMA: Mapping[str, Key | dict[str, Key]] = _Schema()


def walk_schema() -> list[tuple[str, Key]]:
    """(dotted key, Key) for every leaf, in schema order."""
    out: list[tuple[str, Key]] = []
    for name, spec in SCHEMA.items():
        if isinstance(spec, dict):
            out.extend((f"{name}.{sub}", key) for sub, key in spec.items())
        else:
            out.append((name, spec))
    return out
