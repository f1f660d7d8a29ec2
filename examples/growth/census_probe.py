"""Print a census of this process's threads, by Linux thread name, for one framework.

Usage:  python census_probe.py {torch|tf|jax|numpy} [--hold SECONDS]

Imports the framework, runs a little work that starts its thread pools, and
prints one JSON object per stage ("after import", "after work") mapping each
thread name (/proc/self/task/TID/comm) to how many threads carry it.  Threads
that nobody names inherit the name of the thread that created them, usually
the process's own comm (shown as "process_comm" in the output).

Standalone: the standard library plus the framework under test.
"""

import collections
import json
import os
import sys
import time


def census():
    counts = collections.Counter()
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                counts[f.read().strip()] += 1
        except OSError:  # thread exited between listdir and open
            pass
    return dict(sorted(counts.items()))


def process_comm():
    with open("/proc/self/comm") as f:
        return f.read().strip()


def report(framework, stage, version):
    time.sleep(0.5)  # let freshly spawned pool threads set their names
    threads = census()
    print(
        json.dumps(
            {
                "framework": framework,
                "version": version,
                "stage": stage,
                "process_comm": process_comm(),
                "total": sum(threads.values()),
                "threads": threads,
            }
        ),
        flush=True,
    )


def _torch_forked():
    import torch

    @torch.jit.script
    def half(x):
        return torch.mm(x, x).sum()

    @torch.jit.script
    def forked(x):
        futs = [torch.jit.fork(half, x) for _ in range(4)]
        return [torch.jit.wait(f) for f in futs]

    return forked


def work_torch():
    import torch

    forked = _torch_forked()
    a = torch.randn(512, 512)
    for _ in range(5):
        a = torch.tanh(a @ a)

    # Inter-op pool: torch.jit.fork inside a scripted function schedules
    # the forked calls onto it (from eager Python, fork runs inline).
    forked(a)
    # Autograd on CPU (runs on the calling thread; no device threads).
    w = torch.randn(64, 64, requires_grad=True)
    torch.tanh(w @ w).sum().backward()
    # DataLoader in-process (num_workers=0) for good measure.
    ds = torch.utils.data.TensorDataset(torch.randn(64, 8))
    for _ in torch.utils.data.DataLoader(ds, batch_size=16, num_workers=0):
        pass
    return torch.__version__


def work_tf():
    import tensorflow as tf

    @tf.function
    def mm(x):
        return tf.reduce_sum(tf.matmul(x, x))

    mm(tf.random.normal((512, 512))).numpy()
    ds = (
        tf.data.Dataset.range(1000)
        .map(lambda x: x * 2, num_parallel_calls=tf.data.AUTOTUNE)
        .batch(32)
        .prefetch(tf.data.AUTOTUNE)
    )
    for _ in ds:
        pass
    return tf.__version__


def work_jax():
    import jax
    import jax.numpy as jnp

    @jax.jit
    def mm(x):
        return jnp.tanh(x @ x).sum()

    mm(jnp.ones((512, 512))).block_until_ready()
    return jax.__version__


def work_numpy():
    import numpy as np

    a = np.random.default_rng(0).standard_normal((1500, 1500))
    (a @ a).sum()
    return np.__version__


IMPORTS = {"torch": "torch", "tf": "tensorflow", "jax": "jax", "numpy": "numpy"}
WORK = {"torch": work_torch, "tf": work_tf, "jax": work_jax, "numpy": work_numpy}


def main():
    args = sys.argv[1:]
    hold = 0.0
    if len(args) == 3 and args[1] == "--hold":
        hold = float(args.pop())
        args.pop()
    if len(args) != 1 or args[0] not in WORK:
        sys.exit(f"usage: {sys.argv[0]} {{{'|'.join(WORK)}}} [--hold SECONDS]")
    fw = args[0]
    mod = __import__(IMPORTS[fw])
    report(fw, "after import", getattr(mod, "__version__", "?"))
    version = WORK[fw]()
    report(fw, "after work", version)
    if hold:  # keep the threads alive, e.g. for gdb -p PID
        print(f"holding pid {os.getpid()} for {hold:g}s", flush=True)
        time.sleep(hold)


if __name__ == "__main__":
    main()
