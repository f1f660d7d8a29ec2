"""CONTROL: model.predict on images of a random size each call (grew without bound on TF 2.1).

Source: https://github.com/tensorflow/tensorflow/issues/38598 (tensorflow #38598, 2020)
Reporter's words: "The following minimal example produces (and logs) continuous memory growth"
  (a later comment there: "the memleak seems to be fixed" in tf-nightly 2.3)
Changes for this machine: image sides drawn from 128..512 instead of 128..1024 (CPU time);
  the reporter's 10000 predictions become --steps (default 10000) and --seconds (default 40).
  Otherwise the reporter's script and print.
Grows: RSS rises steeply for the first ~20 s (to ~860 MiB), then slowly and slowing: 864 ->
  906 -> 930 -> 939 MiB at 25/50/75/100% of a 76 s run (~1.1 MiB/s fitted over its last 75%).
  A borderline control: no limit is reached, but the floor still creeps
Dies of: nothing; exits after --seconds
Prints: "Memory usage after N prediction(s): X MiB" before each predict, plus Keras' own
  "1/1 ..." progress line
"""
import argparse
import os
import time

import numpy as np
import psutil

# Disable GPU, use CPU only
os.environ['CUDA_VISIBLE_DEVICES'] = '-1'
import tensorflow as tf

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=10000)
ap.add_argument("--seconds", type=float, default=40.0)
args = ap.parse_args()

print(tf.version.GIT_VERSION, tf.version.VERSION)

inputs = tf.keras.layers.Input((None, None, 3))
x = tf.keras.layers.Conv2D(filters=64, kernel_size=(3, 3), padding='same')(inputs)
model = tf.keras.models.Model(inputs=inputs, outputs=x)

t0 = time.monotonic()
for count in range(args.steps):
    memory_usage_in_MiB = psutil.Process().memory_info().rss / (1024 * 1024)
    print(f'Memory usage after {count} prediction(s):',
          f'{memory_usage_in_MiB:.3f} MiB',
          flush=True)
    image_shape = [*np.random.randint(128, 512, (2,)).tolist(), 3]
    image = np.random.uniform(0, 256, image_shape)
    model.predict(image[np.newaxis])
    if time.monotonic() - t0 > args.seconds:
        break
