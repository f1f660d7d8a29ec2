"""TensorFlow: its pools follow TF_NUM_INTRAOP_THREADS / TF_NUM_INTEROP_THREADS, read once at
the first device creation, and may exceed the affinity (4 on 2 CPUs starts 4)."""

from __future__ import annotations

from collections.abc import Callable

from launcher.checks import CheckInput
from launcher.frameworks.base import (
    Framework,
    Installed,
    Model,
    Parts,
    Pools,
    Settings,
    Want,
    openblas,
)
from launcher.keys import Key
from launcher.threadpools import ThreadPool

PRIVATE_POOL = "private_pool"  # its Settings count: tf.data's private pool (intra-op's by default)


def _cpu(s: Settings, cpus: int, _: Installed) -> Parts:
    # tensorflow-cpu 2.21 at 1-2 CPUs (2026-11): main, one runtime thread and
    # tf_graph_runner; the intra-op pool minus the caller; the inter-op pool (tf_Compute) in
    # full; Keras `fit` on tf.data adds a second inter-op pool of 4 for the functions, one
    # tf.data iterator thread and 3 per thread of tf.data's private pool.
    return {**openblas(s, cpus), "tf_runtime": 2, "tf_intra_op": s.intra - 1,
            "tf_inter_op": s.inter, "tf_function_inter_op": 4,
            "tf_data": 1 + 3 * s.count(PRIVATE_POOL, s.intra)}


def _gpu(cpus: int, gpus: int) -> Parts:
    # Not measured (no TensorFlow on the GPU host): the driver's event thread and the
    # EventMgr's poller per GPU (device_event_mgr.cc), with jax's GPU runtime as the floor
    # of what a CUDA process starts.
    return {"gpu_driver (not measured)": 1, "tf_event_mgr (not measured)": gpus}


def first_op() -> None:
    import tensorflow as tf

    a = tf.ones((256, 256))
    float(tf.reduce_sum(tf.matmul(a, a)))


def train() -> None:
    import os

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


def matmul(n: int) -> Callable[[], object]:
    import tensorflow as tf

    a = tf.ones((n, n))
    return lambda: float(tf.matmul(a, a)[0, 0])


def _map_count(c: CheckInput) -> list[tuple[str, str]]:
    """TF/CUDA leak memory maps per fold; a container cannot raise vm.max_map_count."""
    count = c.facts.max_map_count
    if c.gpus and (count is None or count <= 65530):
        return [("warn", f"vm.max_map_count is {count} and cannot be raised from "
                         f"a container; TF/CUDA leak ~730 maps per fold, so run one process per "
                         f"fold.")]
    return []


def _environment(p: Pools) -> Want:
    data_par, data_src = p.pick("threads.data_parallelism", p.intra, p.same)
    private, private_src = p.pick("threads.private_threadpool_size", p.intra, p.same)
    prefetch, prefetch_src = p.pick("threads.prefetch", 2, "2 batches")
    return {
        "TF_NUM_INTRAOP_THREADS": (str(p.intra), p.intra_src),
        "TF_NUM_INTEROP_THREADS": (str(p.inter), p.inter_src),
        "LAUNCHER_TF_DATA_PARALLELISM": (str(data_par), data_src),
        "LAUNCHER_TF_DATA_PREFETCH": (str(prefetch), prefetch_src),
        "LAUNCHER_TF_DATA_PRIVATE_THREADPOOL": (str(private), private_src),
    }


FRAMEWORK = Framework(
    name="tf", label="tensorflow", module="tensorflow", marks=("tf_keras",),
    distributions=("tensorflow", "tensorflow-cpu"), install="tensorflow-cpu",
    models=(Model("2", "tensorflow-cpu 2.21, 1-2 CPUs, 2026-11", _cpu, _gpu),),
    requirements={"nvidia": ["tensorflow[and-cuda]==2.21.0"], "none": ["tensorflow-cpu==2.21.0"]},
    unsupported={"amd": "PyPI's tensorflow-rocm stops at 2.14 (2023), with wheels for Python "
                        "3.9-3.11 only, and the AMD base's Python is 3.12"},
    rounding="half-up",
    checks=(_map_count,),
    profile_keys={"threads": {
        "data_parallelism": Key("int", "tf.data map num_parallel_calls (`auto` = intra_op)",
                                auto=True),
        "prefetch": Key("int", "tf.data prefetch buffer", auto=True),
        "private_threadpool_size": Key("int", "tf.data private_threadpool_size (`auto` = "
                                              "intra_op)", auto=True)}},
    # tf.data's are read by launcher's workloads and by user code through the caps file
    variables={"TF_NUM_INTRAOP_THREADS": "TensorFlow intra-op pool (process_util.cc)",
               "TF_NUM_INTEROP_THREADS": "TensorFlow inter-op pool",
               "LAUNCHER_TF_DATA_PARALLELISM": "tf.data map num_parallel_calls",
               "LAUNCHER_TF_DATA_PREFETCH": "tf.data prefetch buffer",
               "LAUNCHER_TF_DATA_PRIVATE_THREADPOOL": "tf.data private_threadpool_size"},
    environment=_environment,
    settings_from={"intra": "TF_NUM_INTRAOP_THREADS", "inter": "TF_NUM_INTEROP_THREADS",
                   PRIVATE_POOL: "LAUNCHER_TF_DATA_PRIVATE_THREADPOOL"},
    pool_labels={"TF_NUM_INTRAOP_THREADS": "TF intra", "TF_NUM_INTEROP_THREADS": "TF inter"},
    facts=("TF_NUM_INTRAOP_THREADS / TF_NUM_INTEROP_THREADS are read once, at the first "
           "device creation; TF/CUDA leak ~730 memory maps per fold: one process per fold",),
    probe=__name__,
    # measured with tensorflow-cpu 2.21 on 2 CPUs, 2026-11-26: tf.data's iterator and private
    # pools, the intra-op Eigen pool and XLA's are named past 15 characters, so Linux refuses
    # the names; the private pools' threads then carry tf_Compute (their creator's)
    thread_pools=(
        ThreadPool(r"tf_data_|dataset-memory-", "tf.data"),
        ThreadPool(r"tf_Compute$", "TF inter-op (and the tf.data private pools it starts)"),
        ThreadPool(r"tf_numa_", "TF intra-op (Eigen)"),
        ThreadPool(r"tf_graph_runner$", "TF graph runner"),
    ),
    loaded_from="libtensorflow_framework",
    unnamed_pools=("tf.data's iterator and private pools (tf_data_iterator_resource, "
                   "tf_data_private_threadpool) and TF's intra-op pool"),
    growth_fix=("free each fold's datasets, iterators and models (del them, "
                "tf.keras.backend.clear_session(), gc.collect()), or run each fold in a fresh "
                "process (as tf-train does)"),
)
