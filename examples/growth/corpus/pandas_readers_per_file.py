"""One pandas chunked reader per file, all kept (the reporter's list comprehension over 5000+ files), each file's chunk copied into numpy and transformed: the floor rises a few MB a file under the copies' sawtooth.

Source: https://github.com/pandas-dev/pandas/issues/21516 (pandas #21516, 2018)
Reporter's words: "trajectory = [pd.read_csv(f, delim_whitespace=True, header=None,
  chunksize=10000) for f in filelist] ... The memory usage raises very soon and exceeds 20GB+"
Changes for this machine: 40 synthetic whitespace-separated files of 20000 x 8 floats, read in
  turn; each reader kept (as the comprehension keeps them) with its first chunk; each chunk's
  values copied and FFT'd as the reporter did (the copies are freed each file); sep=r"\s+" for
  delim_whitespace; the file list cycles.
Grows: memory (the kept readers and chunks), under a sawtooth of each file's copies
Dies of: memory 400MiB after ~60-90 s (OOM kill)
Prints: nothing per file
"""
import os
import tempfile
import time

import numpy as np
import pandas as pd

tmp = tempfile.mkdtemp()
filelist = []
rng = np.random.default_rng(0)
for i in range(40):
    path = os.path.join(tmp, f"traj{i}.txt")
    np.savetxt(path, rng.normal(size=(20000, 8)), fmt="%.6f")
    filelist.append(path)

trajectory = []
chunks = []
i = 0
while True:
    f = filelist[i % len(filelist)]
    i += 1
    reader = pd.read_csv(f, sep=r"\s+", header=None, chunksize=10000)
    trajectory.append(reader)
    chunk = reader.get_chunk()
    chunks.append(chunk)
    X = np.asarray([chunk.values] * 6)  # the copies, freed at the next file
    FX = np.fft.fft(X, axis=0)
    del X, FX
    time.sleep(0.3)
