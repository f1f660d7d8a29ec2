"""Import a framework, run a first operation, print the thread count (a JSON line).

Used by the thread-estimate tests, `launcher calibrate` and the benchmarks:
`python -m launcher.workloads.threadprobe [--peak] tf [SECONDS]`; with --peak, also the most
threads the process had from start through a few compiled training steps; with SECONDS, the
throughput of a 384x384 matmul loop run for that long (iterations/s).
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
    return sorted(n for _, n in _named())


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


def train(framework: str) -> None:
    """A few real training steps, compilation included: what the peak estimate covers."""
    if framework == "none":
        import numpy as np

        a = np.ones((384, 384))
        for _ in range(5):
            a = np.tanh(a @ a / 384)
    elif framework == "torch":
        import torch

        layer = torch.nn.TransformerEncoderLayer(32, nhead=2, dim_feedforward=64,
                                                 batch_first=True, dropout=0.0)
        enc = torch.nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
        opt = torch.optim.Adam(enc.parameters())
        for _ in range(5):
            loss = enc(torch.randn(64, 8, 32)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    elif framework == "tf":
        import numpy as np
        import tensorflow as tf

        par = int(os.environ.get("LAUNCHER_TF_DATA_PARALLELISM", "1"))
        opts = tf.data.Options()
        opts.threading.private_threadpool_size = int(
            os.environ.get("LAUNCHER_TF_DATA_PRIVATE_THREADPOOL", str(par)))
        opts.threading.max_intra_op_parallelism = 1
        x = np.random.default_rng(0).random((600, 16)).astype("float32")
        y = (x.sum(1) > 8).astype("float32")
        ds = (tf.data.Dataset.from_tensor_slices((x, y)).shuffle(600)
              .map(lambda a, b: (a * 1.0, b), num_parallel_calls=par).batch(32).prefetch(2)
              .with_options(opts))
        model = tf.keras.Sequential([tf.keras.Input((16,)),
                                     tf.keras.layers.Dense(32, activation="relu"),
                                     tf.keras.layers.Dense(1, activation="sigmoid")])
        model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
        model.fit(ds, epochs=2, verbose=0)
        model.evaluate(ds, verbose=0)
    elif framework == "jax":  # stress-jax's phase 2: scan, vmap and grad, compiled
        import jax

        from launcher.workloads.stress_jax import build, init_params

        fn, params = build(2, 50), init_params()
        for i in range(3):
            jax.block_until_ready(fn(params, jax.random.PRNGKey(i), 256))


class Peak:
    """The most threads the process had, sampled every millisecond (this sampler excluded)."""

    def __init__(self) -> None:
        import threading

        self.count, self.names, self.me = 0, [], -1
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        import threading

        self.me = threading.get_native_id()
        while not self.done.wait(0.001):
            names = [n for tid, n in _named() if tid != self.me]
            if len(names) > self.count:
                self.count, self.names = len(names), sorted(names)

    def stop(self) -> tuple[int, list[str]]:
        self.done.set()
        self.thread.join()
        return self.count, self.names


def _named() -> list[tuple[int, str]]:
    out = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                out.append((int(tid), f.read().strip()))
        except OSError:
            pass
    return out


def main() -> None:
    args = sys.argv[1:]
    peak = None
    if "--peak" in args:  # from start to after training, compilation included
        args.remove("--peak")
        peak = Peak()
    framework = args[0] if args else "none"
    first_op(framework)
    names = thread_names()
    if peak is not None:  # not counting the sampler
        names.remove(next(n for tid, n in _named() if tid == peak.me))
    out: dict[str, object] = {"framework": framework, "threads": len(names), "names": names}
    if peak is not None:
        train(framework)
        out["peak"], out["peak_names"] = peak.stop()
    if len(args) > 1:
        out["per_s"] = round(matmul_loop(framework, float(args[1])), 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
