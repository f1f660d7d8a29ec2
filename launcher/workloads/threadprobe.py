"""Import a framework, run a first operation, print the thread count (a JSON line).

Used by the thread-estimate tests and the benchmarks: `python -m launcher.workloads.threadprobe tf`.
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


def main() -> None:
    framework = sys.argv[1] if len(sys.argv) > 1 else "none"
    first_op(framework)
    names = thread_names()
    print(json.dumps({"framework": framework, "threads": len(names), "names": names}))


if __name__ == "__main__":
    main()
