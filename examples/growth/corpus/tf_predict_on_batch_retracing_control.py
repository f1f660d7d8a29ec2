"""CONTROL: predict_on_batch with a batch size that changes every call (retraced every call on TF 2.1; not now).

Source: https://github.com/tensorflow/tensorflow/issues/34907 (tensorflow #34907, 2019)
Reporter's words: "the traced calls have a fixed batch size. Therefore, if batch size changes
  regularly, the function is retraced all the time."
Changes for this machine: the reporter's 300 calls (batch sizes 1..299) become --steps
  (default 100000, batch sizes 1..100000); the Dense input_shape warning of Keras 3 is left as is.
  Otherwise the reporter's script.
Grows: nothing on TF 2.21 / Keras 3 (RSS ~860 -> 891 MiB over 150 s, ~0.1 MiB/s fitted)
Dies of: nothing within 150 s here (run it with --steps to end it)
Prints: nothing per step (TensorFlow logs "N out of the last M calls to <function ...> triggered
  tf.function retracing" warnings, if any, on stderr)
"""
import argparse

import numpy as np
import tensorflow as tf

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=100000)
args = ap.parse_args()

model = tf.keras.Sequential([
    tf.keras.layers.Dense(1, input_shape=[1])
])
model.compile(optimizer=tf.optimizers.Adam(),
              loss=tf.losses.MeanSquaredError())

for i in range(1, args.steps):
    model.predict_on_batch(np.ones([i, 1]))
