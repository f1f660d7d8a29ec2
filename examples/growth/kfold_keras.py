"""A deliberately leaky Keras k-fold, used as the example in the growth docs.

Like many real cross-validation scripts, it runs every fold in ONE process and
keeps each fold's model, tf.data dataset and iterator alive (they are appended
to a list "for later inspection").  Nothing is ever released, so the process's
thread count grows fold after fold: every live tf.data iterator keeps its own
background threads (tf.data's iterator-resource and private thread pools).

    python kfold_keras.py --folds 6 [--checkpoint ckpt.json] [--census]

* prints ``fold N/M`` (flushed) at the start of each fold;
* on SIGTERM prints ``checkpoint written after fold K`` (K = last completed
  fold), writes a tiny JSON file to --checkpoint if given, and exits 0;
* --census: also print, at the start of each fold, the thread count
  (/proc/self/task), the peak seen by a sampler thread polling every 50 ms
  during the previous fold, and a {thread name: count} census.  The sampler
  thread itself is left out of all three.

Tiny random data and a tiny Dense model: each fold takes a few seconds on 2 CPUs.
"""

import argparse
import collections
import json
import os
import signal
import threading
import time

completed = 0  # last completed fold
checkpoint_path = None


def on_sigterm(signum, frame):
    if checkpoint_path:
        with open(checkpoint_path, "w") as f:
            json.dump({"completed_folds": completed, "time": time.time()}, f)
    print(f"checkpoint written after fold {completed}", flush=True)
    # Leaked iterators keep tf.data threads busy; skip interpreter teardown.
    os._exit(0)


def parse_args():
    global checkpoint_path
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--folds", type=int, default=6)
    p.add_argument("--checkpoint", default=None)
    p.add_argument("--census", action="store_true")
    args = p.parse_args()
    checkpoint_path = args.checkpoint
    return args


# Parsed and installed before the slow TensorFlow import, so an early SIGTERM
# still reports "after fold 0", writes the checkpoint and exits 0.
args = parse_args()
signal.signal(signal.SIGTERM, on_sigterm)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def thread_names(skip_tid=None):
    names = collections.Counter()
    for tid in os.listdir("/proc/self/task"):
        if skip_tid is not None and int(tid) == skip_tid:
            continue
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                names[f.read().strip()] += 1
        except OSError:
            pass
    return names


class Sampler(threading.Thread):
    """Polls /proc/self/task every 50 ms and keeps the peak since last reset."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peak = 0
        self.tid = None

    def run(self):
        self.tid = threading.get_native_id()
        while True:
            n = len(os.listdir("/proc/self/task")) - 1  # minus this sampler
            self.peak = max(self.peak, n)
            time.sleep(0.05)

    def take_peak(self):
        peak, self.peak = self.peak, 0
        return peak


def make_data(n=512, d=16, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)).astype("float32")
    y = (x.sum(axis=1) > 0).astype("float32")
    return x, y


def make_model(d):
    model = keras.Sequential(
        [
            keras.Input((d,)),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    model.compile(optimizer="adam", loss="binary_crossentropy")
    return model


def main():
    global completed

    sampler = None
    if args.census:
        sampler = Sampler()
        sampler.start()
        while sampler.tid is None:
            time.sleep(0.01)

    x, y = make_data()
    folds = np.array_split(np.arange(len(x)), args.folds)
    kept = []  # the bug: every fold's model, dataset and iterator stay alive

    for k in range(args.folds):
        print(f"fold {k + 1}/{args.folds}", flush=True)
        if sampler:
            names = thread_names(skip_tid=sampler.tid)
            print(
                json.dumps(
                    {
                        "fold": k + 1,
                        "threads": sum(names.values()),
                        "peak_prev_fold": sampler.take_peak(),
                        "census": dict(sorted(names.items())),
                    }
                ),
                flush=True,
            )

        val = folds[k]
        train = np.setdiff1d(np.arange(len(x)), val)
        ds = (
            tf.data.Dataset.from_tensor_slices((x[train], y[train]))
            .shuffle(len(train), seed=k)
            .map(lambda a, b: (a * 1.0, b), num_parallel_calls=tf.data.AUTOTUNE)
            .batch(32)
            .prefetch(tf.data.AUTOTUNE)
        )
        it = iter(ds)
        next(it)  # "peek at a batch" -- and keep the iterator around
        model = make_model(x.shape[1])
        model.fit(ds, epochs=2, shuffle=False, verbose=0)  # ds is shuffled
        loss = model.evaluate(x[val], y[val], verbose=0)
        kept.append((model, ds, it))
        completed = k + 1
        print(f"  val loss {loss:.3f}", flush=True)

    if sampler:
        names = thread_names(skip_tid=sampler.tid)
        print(
            json.dumps(
                {
                    "fold": "end",
                    "threads": sum(names.values()),
                    "peak_prev_fold": sampler.take_peak(),
                    "census": dict(sorted(names.items())),
                }
            ),
            flush=True,
        )
    if checkpoint_path:
        with open(checkpoint_path, "w") as f:
            json.dump({"completed_folds": completed, "time": time.time()}, f)
    print("done", flush=True)


if __name__ == "__main__":
    main()
