"""A Keras Sequential model created in every iteration and discarded, without clear_session.

Source: https://github.com/tensorflow/tensorflow/issues/30324 (tensorflow #30324, 2019)
Reporter's words: "when creating a `tf.keras.Sequential` model inside a loop and discarding it
  immediately, the memory increases over time."
Changes for this machine: `tf.compat.v1.enable_eager_execution()` dropped (eager is the default
  in TF 2); the reporter's 100 iterations become --iterations (default 100000). Loop body and
  print are the reporter's (the print is the machine's used memory in GiB, not the process's).
Grows: RSS (~23 MiB per second, ~1.7 MiB per printed line (one model) here)
Dies of: memory 2GiB after ~41 s here (RSS reached 2048 MiB at 41 s)
Prints: "<system used memory in GiB>" once per model, e.g. "2.8431854248046875"
"""
import argparse

import psutil
import tensorflow as tf

ap = argparse.ArgumentParser()
ap.add_argument("--iterations", type=int, default=100000)
args = ap.parse_args()

for _ in range(args.iterations):
    tf.keras.Sequential([tf.keras.layers.Dense(3000, input_dim=3000)])
    print(psutil.virtual_memory().used / 2 ** 30, flush=True)
