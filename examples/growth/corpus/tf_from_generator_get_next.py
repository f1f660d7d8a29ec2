"""A TF session loop that calls iterator.get_next() on every step: one more thread per step.

Source: https://github.com/tensorflow/tensorflow/issues/15162 (tensorflow #15162, 2017)
Reporter's words: "the program will crash with an error: ... thread constructor failed:
  Resource temporarily unavailable"
Changes for this machine: TF 1.x names through tf.compat.v1 (disable_eager_execution,
  compat.v1 Dataset.from_generator, make_one_shot_iterator, Session); `while True` becomes
  --seconds (default 600). The loop body, `sess.run(ds.get_next())`, is the reporter's: each
  call adds a new IteratorGetNext op to the graph.
Grows: threads (~15 per second here, one per sess.run(get_next()) call, slowing as the graph
  grows: 319 at 10 s, 585 at 20 s, 843 at 36 s; nothing is printed, so no cycles); memory maps
  with them (~29 per second: the new threads' stacks)
Dies of: pids 1024 after ~49 s here (the thread count reached 1024 at 49 s; TF 2.21 also warns
  "An unusually high number of `Iterator.get_next()` calls was detected")
Prints: nothing per step
"""
import argparse
import itertools
import time

import tensorflow as tf

tf.compat.v1.disable_eager_execution()

ap = argparse.ArgumentParser()
ap.add_argument("--seconds", type=float, default=600.0)
args = ap.parse_args()


def gen():
  for i in itertools.count(1):
    yield (i, [1] * 5)

ds = tf.compat.v1.data.Dataset.from_generator(
    gen, (tf.int64, tf.int64), (tf.TensorShape([]), tf.TensorShape([None])))
ds = tf.compat.v1.data.make_one_shot_iterator(ds)

t0 = time.monotonic()
with tf.compat.v1.Session() as sess:
    while time.monotonic() - t0 < args.seconds:
        sess.run(ds.get_next())  # (1, array([1, 1, 1, 1, 1]))...
