"""A new Keras model built, compiled and fitted in every iteration of a `while True` loop.

Source: https://github.com/tensorflow/tensorflow/issues/41973 (tensorflow #41973, 2020)
Reporter's words: "Memory leaks." (TF 2.3; a maintainer's reply there begins "in TF 2.3 and
  earlier Keras puts all ...")
Changes for this machine: `while True` becomes --seconds (default 600); the data were already
  random (np.random.rand). Loop body and print are the reporter's; Keras 3 prints its own
  progress bar per fit (verbose default; a few lines per fit when piped).
Grows: RSS (~1.7 MiB per second, ~2.8 MiB per fit (~0.6 fits per second) here; linear for
  150 s)
Dies of: memory 900MiB after ~73 s here (RSS reached 900 MiB at 73 s; 1 GiB at ~145 s)
Prints: "Current memory usage is X MB; Peak was Y MB" (tracemalloc) after each fit, after Keras'
  "32/32 ... loss: ..." progress lines
"""
import argparse
import time

import numpy as np
import tensorflow
from tensorflow import keras
from tensorflow.keras import layers
import gc
import tracemalloc
if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=600.0)
    args = ap.parse_args()
    t0 = time.monotonic()
    tracemalloc.start()
    while time.monotonic() - t0 < args.seconds:
        inputs = keras.Input(shape=(10,))
        out = layers.Dense(1)(inputs)
        model = keras.Model(inputs=inputs, outputs=out)
        model.compile(optimizer="adam", loss="mse")
        train = np.random.rand(1000,10)
        label = np.random.rand(1000)
        model.fit(train, label)
        gc.collect()
        current, peak = tracemalloc.get_traced_memory()
        print(f"Current memory usage is {current / 10**6}MB; Peak was {peak / 10**6}MB", flush=True)
