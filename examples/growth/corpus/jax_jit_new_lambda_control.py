"""CONTROL: a new jit(lambda) made and run every iteration; its cache entries die with it (fixed 2019).

Source: https://github.com/jax-ml/jax/pull/1605 (jax #1605, 2019: "fix a leak where compiled
  results lived too long")
Reporter's words: "Even though f was being rebound on every iteration, the cache entries
  corresponding to the previous iterations of the loop were sticking around."
Changes for this machine: the array is (30, 1024, 1024) instead of (300, 1024, 1024) (120 MiB,
  not 1.2 GiB); the 40 iterations become --steps (default 40) and --seconds (default 30).
Grows: nothing on JAX 0.10 (RSS 230-353 MiB sawtooth, no trend over 35 s; each iteration
  allocates and frees 120 MiB)
Dies of: nothing; exits after --steps or --seconds
Prints: nothing per step
"""
import argparse
import time

import jax.numpy as np
from jax import jit

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=40)
ap.add_argument("--seconds", type=float, default=30.0)
args = ap.parse_args()
t0 = time.monotonic()

for i in range(args.steps):
  f = jit(lambda: 1. * np.ones((30, 1024, 1024)))
  f().block_until_ready()
  if time.monotonic() - t0 > args.seconds:
    break
