"""Control: pandas #21516's loop with each file's reader closed and nothing kept: each file's copies swing memory up and down, with no trend.

Source: https://github.com/pandas-dev/pandas/issues/21516 (pandas #21516, 2018: the loop as the
  maintainers advised, one reader at a time)
Changes for this machine: as pandas_readers_per_file.py, but `with pd.read_csv(...) as reader`
  and no list; runs --seconds (75).
Grows: nothing (a sawtooth of ~60 MB per file)
Limit: memory 400MiB (never reached)
Prints: nothing
"""
import os
import sys
import tempfile
import time

import numpy as np
import pandas as pd

seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 75
tmp = tempfile.mkdtemp()
filelist = []
rng = np.random.default_rng(0)
for i in range(40):
    path = os.path.join(tmp, f"traj{i}.txt")
    np.savetxt(path, rng.normal(size=(20000, 8)), fmt="%.6f")
    filelist.append(path)

t0 = time.monotonic()
i = 0
while time.monotonic() - t0 < seconds:
    f = filelist[i % len(filelist)]
    i += 1
    with pd.read_csv(f, sep=r"\s+", header=None, chunksize=10000) as reader:
        chunk = reader.get_chunk()
    X = np.asarray([chunk.values] * 6)
    FX = np.fft.fft(X, axis=0)
    del X, FX, chunk
    time.sleep(0.3)
