"""No framework: numpy alone (OpenBLAS builds its whole pool at `import numpy`)."""

from __future__ import annotations

from collections.abc import Callable

from launcher.frameworks.base import Framework, Installed, Model, Parts, Settings, openblas


def _cpu(s: Settings, cpus: int, _: Installed) -> Parts:
    return openblas(s, cpus)  # numpy 2.4, 1-2 CPUs, 2026-11


def _gpu(cpus: int, gpus: int) -> Parts:
    return {}


def first_op() -> None:
    import numpy as np

    a = np.ones((256, 256))
    (a @ a).sum()


def train() -> None:
    import numpy as np

    a = np.ones((384, 384))
    for _ in range(5):
        a = np.tanh(a @ a / 384)


def matmul(n: int) -> Callable[[], object]:
    import numpy as np

    a = np.ones((n, n), dtype=np.float32)
    return lambda: (a @ a)[0, 0]


FRAMEWORK = Framework(
    name="none", label="numpy", module="numpy", distributions=("numpy",), install="numpy",
    models=(Model("2", "numpy 2.4, 1-2 CPUs, 2026-11", _cpu, _gpu),),
    # unpinned: a base image's own numpy serves (OpenBLAS's pool is the same in 1.x and 2.x)
    requirements={"nvidia": ["numpy"], "amd": ["numpy"], "none": []},
    facts=("OPENBLAS_NUM_THREADS > GOTO_NUM_THREADS > OMP_NUM_THREADS, read at import",),
    probe=__name__,
    needed=False,  # a plain Python workload imports no numpy; one that does gets its pool capped
)
