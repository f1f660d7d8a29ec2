"""Control: a method cached with functools.lru_cache(maxsize=128) returning a large array for each new input: memory climbs until the cache holds 128 entries, then stays.

Source: https://github.com/dstansby/pfsspy/issues/148 (pfsspy #148, 2020; the fix #150)
Reporter's words: "the first time the memory usage increases ... you can see the memory usage
  climbs each call" (Output.bg under lru_cache, which keeps the most recent 128 calls)
Changes for this machine: a 1 MiB array stands in for the 3D field; a new input every 0.15 s;
  runs --seconds (75).
Grows: memory to ~128 MiB over ~20 s, then flat (a bounded cache: no leak)
Limit: memory 400MiB (never reached)
Prints: nothing
"""
import sys
import time
from functools import lru_cache

import numpy as np


class Output:
    @lru_cache(maxsize=128)
    def bg(self, day):
        return np.full((128, 128, 8), float(day))  # 1 MiB


seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 75
po = Output()
t0 = time.monotonic()
day = 0
while time.monotonic() - t0 < seconds:
    day += 1
    po.bg(day).sum()
    time.sleep(0.15)
