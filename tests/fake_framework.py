"""A made-up framework ("onnx", an inference runtime), registered as any framework is: this
module and one line in launcher.frameworks.REGISTRY. Its pool is one thread per intra-op
thread beside the caller, and a GPU adds one stream thread per device."""

from __future__ import annotations

import threading
from collections.abc import Callable

from launcher.frameworks.base import Framework, Installed, Model, Parts, Settings


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


FRAMEWORK = Framework(
    name="onnx", label="onnxruntime", module="onnxruntime", distributions=("onnxruntime",),
    install="onnxruntime",
    models=(Model("1", "fake, for the registry test", _cpu, _gpu),),
    requirements={"none": ["onnxruntime==1.20.0"], "nvidia": ["onnxruntime-gpu==1.20.0"]},
    probe=__name__,
)
