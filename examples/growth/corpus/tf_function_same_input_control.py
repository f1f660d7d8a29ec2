"""CONTROL: a trivial @tf.function called 100,000,000 times with the same tensor (leaked in 2.8-2.11).

Source: https://github.com/tensorflow/tensorflow/issues/50765 (tensorflow #50765, comment of 2022-10-04)
Reporter's words: "Ram usage keeps growing everytime I call a tf. function ... it'll increase
  quite quickly"
Changes for this machine: the loop stops after --seconds (default 30); loop body and print are
  the commenter's.
Grows: nothing on TF 2.21 (RSS flat at 746 MiB: 0.004 MiB/s fitted)
Dies of: nothing; exits after --seconds
Prints: "hi" every 20,000 calls (~every 6.8 s here)
"""
import argparse
import time

import tensorflow as tf

ap = argparse.ArgumentParser()
ap.add_argument("--seconds", type=float, default=30.0)
args = ap.parse_args()
t0 = time.monotonic()

@tf.function
def operate(img):
    return img

img = tf.zeros((6,6,7))
for i in range (100000000):
    if i%20000==0: print('hi', flush=True)
    s= operate(img)
    if time.monotonic() - t0 > args.seconds:
        break
