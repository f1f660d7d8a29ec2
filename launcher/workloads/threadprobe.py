"""Import a framework, run a first operation, print the thread count (a JSON line).

Used by the thread-estimate tests and the benchmarks:
`python -m launcher.workloads.threadprobe tf [SECONDS]`; with SECONDS, also the throughput of a
384x384 matmul loop run for that long (iterations/s).
"""

from __future__ import annotations

import json
import os
import sys


def first_op(framework: str) -> None:
    if framework == "none":
        import numpy as np

        a = np.ones((256, 256))
        (a @ a).sum()
    elif framework == "torch":
        import torch

        a = torch.ones(256, 256)
        (a @ a).sum().item()
    elif framework == "tf":
        import tensorflow as tf

        a = tf.ones((256, 256))
        float(tf.reduce_sum(tf.matmul(a, a)))
    elif framework == "jax":
        import jax
        import jax.numpy as jnp

        a = jnp.ones((256, 256))
        float(jax.jit(lambda x: (x @ x).sum())(a))
    else:
        raise SystemExit(f"unknown framework {framework!r}")


def thread_names() -> list[str]:
    names = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except OSError:
            pass
    return sorted(names)


def matmul_loop(framework: str, seconds: float) -> float:
    """Iterations per second of a 384x384 float32 matmul (the FIELD.md kernel)."""
    import time

    n = 384
    if framework == "none":
        import numpy as np

        a = np.ones((n, n), dtype=np.float32)
        step = lambda: (a @ a)[0, 0]  # noqa: E731
    elif framework == "torch":
        import torch

        a = torch.ones(n, n)
        step = lambda: (a @ a)[0, 0].item()  # noqa: E731
    elif framework == "tf":
        import tensorflow as tf

        a = tf.ones((n, n))
        step = lambda: float(tf.matmul(a, a)[0, 0])  # noqa: E731
    else:
        import jax
        import jax.numpy as jnp

        a = jnp.ones((n, n))
        f = jax.jit(lambda x: x @ x)
        step = lambda: f(a).block_until_ready()  # noqa: E731
    step()
    time.sleep(0.3)  # let a CPU quota refill after the import, so timing starts without debt
    count, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step()
        count += 1
    return count / (time.perf_counter() - t0)


def main() -> None:
    framework = sys.argv[1] if len(sys.argv) > 1 else "none"
    first_op(framework)
    names = thread_names()
    out = {"framework": framework, "threads": len(names), "names": names}
    if len(sys.argv) > 2:
        out["per_s"] = round(matmul_loop(framework, float(sys.argv[2])), 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
