"""CONTROL: pd.read_csv of a small file 30,000 times (leaked on pandas 2.2.0; not on 3.1).

Source: https://github.com/pandas-dev/pandas/issues/51667 (pandas #51667, comment of 2024-04-17)
Reporter's words: "Resulted in increasing memory usage" (pandas 2.2.0, python 3.11)
Changes for this machine: testfile.csv (the commenter's 190 kB file) is generated: 2,000 rows of
  10 random floats (~390 kB) in the temp directory; --seconds (default 30) ends the loop early.
  Otherwise the commenter's loop and print.
Grows: nothing on pandas 3.1.1 (RSS flat at 78 MiB)
Dies of: nothing; exits after --seconds
Prints: "N: <rss> b / <rss> mb / <rss> gb" every 1000 reads (~every 1.9 s here)
"""
import argparse
import gc
import os
import tempfile
import time

import numpy as np
import pandas as pd
import psutil

ap = argparse.ArgumentParser()
ap.add_argument("--seconds", type=float, default=30.0)
args = ap.parse_args()
t0 = time.monotonic()

print("pandas version: ", pd.__version__)

filepath = os.path.join(tempfile.gettempdir(), "testfile.csv") #190kB
pd.DataFrame(np.random.rand(2000, 10)).to_csv(filepath)

for i in range(1, 30001):
    df = pd.read_csv(filepath)
    process = psutil.Process()
    if i % 1000 == 0:
        #gc.collect()
        print(
            f"{i}: {process.memory_info().rss} b / {process.memory_info().rss/1e6} mb / {process.memory_info().rss/1e9} gb",
            flush=True,
        )
        if process.memory_info().rss / 1e9 > 2:
            break
       # time.sleep(5)
    if time.monotonic() - t0 > args.seconds:
        break
