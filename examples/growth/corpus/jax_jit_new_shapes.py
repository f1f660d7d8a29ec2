"""A jitted function called on a new input shape every step: JAX compiles and caches each one.

Source: https://github.com/jax-ml/jax/issues/2072 (jax #2072, 2020)
Reporter's words: "this program will very slowly but grow the RAM usage (e.g. grew from 1.5 to
  2.5 in 30-60 minutes), even though apparently it should not" (mattjj: "the compilation cache
  actually grows without bound right now")
Changes for this machine: CPU, not the reporter's Colab GPU; sizes divided by 10 (rows 500 -> 50,
  ranges 15000 -> 1500) and the print's modulus with them (500 -> 50), so a step takes
  milliseconds, not seconds; `from jax.api import jit` is now `from jax import jit`.
  Otherwise the reporter's nested loops and print.
Grows: RSS (~7 MiB per second, ~3.3 MiB per step, ~160 MiB per printed line (50 steps) here,
  rising faster as it goes) and memory maps (~50 per second: 5,189 after 90 s)
Dies of: memory 768MiB after ~71 s here (RSS reached 768 MiB at 71 s; 1 GiB at ~100 s)
Prints: "<datetime> i j <mean>" every 50 steps of j, e.g. "2026-11-27 22:13:34.17 1500 1450 0.03"
"""
from jax import jit
from jax import random
from jax import numpy as np
from datetime import datetime

def f(x, y):
  return np.mean(x.T @ y)

f_jit = jit(f)

for i in range(1500, 0, -1):
  x = random.normal(random.PRNGKey(i), (50, i))
  for j in range(1500, 0, -1):
    y = random.normal(random.PRNGKey(j), (50, j))
    res = f_jit(x, y)
    if i % 50 == 0 and j % 50 == 0:
      print(datetime.now(), i, j, res, flush=True)
