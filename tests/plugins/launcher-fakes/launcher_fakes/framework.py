"""A made-up framework ("onnx", an inference runtime), registered as any framework is: this
module and one entry-point line. Its pool is one thread per intra-op thread beside the caller,
and a GPU adds one stream thread per device. Its runtime is this distribution itself (the
functions below), so a CPU image installs nothing for it: the image carries the plugin."""

from __future__ import annotations

import threading
from collections.abc import Callable

from launcher.frameworks.base import Framework, Installed, Model, Parts, Pools, Settings, Want
from launcher.keys import Key


def _cpu(s: Settings, cpus: int, _: Installed) -> Parts:
    return {"onnx_intra_op": min(s.intra, cpus) - 1, "onnx_scheduler": 1}


def _gpu(cpus: int, gpus: int) -> Parts:
    return {"onnx_streams": gpus}


_started: list[threading.Thread] = []


def first_op() -> None:  # what the runtime would start: a pool the size of the caps
    import os

    for _ in range(int(os.environ.get("OMP_NUM_THREADS", "1"))):
        t = threading.Thread(target=threading.Event().wait, daemon=True)
        t.start()
        _started.append(t)


def train() -> None:
    first_op()


def matmul(n: int) -> Callable[[], object]:
    return lambda: sum(range(n))


def _environment(p: Pools) -> Want:
    """Its own variables: the pool from the intra-op figure, its arena from its own key."""
    want: Want = {"ONNX_INTRA_OP_THREADS": (str(p.intra), p.intra_src)}
    arena = p.get("allocator.onnx_arena")
    if arena is not None:
        want["ONNX_ARENA"] = ("1" if arena else "0", p.src("allocator.onnx_arena"))
    return want


FRAMEWORK = Framework(
    name="onnx", label="onnxruntime", module="launcher_fakes", distributions=("launcher-fakes",),
    install="launcher-fakes", marks=("onnxruntime",),
    models=(Model("1", "fake, for the registry test", _cpu, _gpu),),
    requirements={"none": [], "nvidia": ["onnxruntime-gpu==1.20.0"]},
    probe=__name__,
    profile_keys={"allocator": {"onnx_arena": Key("bool", "onnxruntime: its memory arena")}},
    variables={"ONNX_INTRA_OP_THREADS": "onnxruntime's intra-op pool",
               "ONNX_ARENA": "onnxruntime's memory arena"},
    environment=_environment,
    pool_labels={"ONNX_INTRA_OP_THREADS": "ONNX intra"},  # on a run's first line
)
