"""CONTROL: model.predict called on the same input in a `while True` loop (leaked in 2019; not now).

Source: https://github.com/keras-team/keras/issues/13118 (keras #13118, 2019)
Reporter's words: "When I run the code above, memory usage climbs steadily and will eventually
  consume 20+ GB of memory!"
Changes for this machine: `import keras` is Keras 3 on TensorFlow 2.21; MobileNetV2 with
  weights=None (random weights: no download); the reporter's X was already np.random.rand;
  `while True` becomes --seconds (default 30).
Grows: nothing here (RSS 816-824 MiB after a 10 s warm-up; -0.02 MiB/s fitted)
Dies of: nothing; exits after --seconds
Prints: Keras' own "1/1 ... Xms/step" progress line per predict
"""
import argparse
import time

import keras
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--seconds", type=float, default=30.0)
args = ap.parse_args()

model = keras.applications.mobilenet_v2.MobileNetV2(weights=None)
X = np.random.rand(1, 224, 224, 3)

t0 = time.monotonic()
while time.monotonic() - t0 < args.seconds:
    # Leaks:
    y = model.predict(X)[0]

    # Does not leak:
    # y = [0]
