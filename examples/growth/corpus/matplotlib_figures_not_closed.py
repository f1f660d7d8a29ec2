"""pyplot figures made, saved and deleted in a loop but never closed: pyplot keeps every one.

Source: https://discourse.matplotlib.org/t/on-the-importance-of-close/4132 (matplotlib-users,
  John Hunter, "on the importance of close")
Reporter's words: "I recently spent some time trying to debug what I thought was a memory leak
  in matplotlib ... there is a dictionary in _pylab_helpers that retains a reference to the figure."
Changes for this machine: the Agg backend (no display); the post's `...` (the plotting) is a
  line plot of 1,000 random points; `somefile` is one PNG in the temp directory, overwritten;
  `somerange` is range(--figures) (default 100000). The loop is the post's: figure(), plot,
  savefig, del fig, gc.collect(), no close.
Grows: RSS (~40 MiB per second at first, ~10 late, as gc.collect() walks ever more figures;
  ~13 MiB/s fitted); pyplot warns once, at figure 21 ("More than 20 figures have been opened")
Dies of: memory 1GiB after ~38 s here (RSS reached 1024 MiB at 38 s)
Prints: nothing per step (one RuntimeWarning at the 21st figure)
"""
import argparse
import gc
import os
import tempfile

import matplotlib
matplotlib.use("Agg")
import numpy as np
from matplotlib.pyplot import figure

ap = argparse.ArgumentParser()
ap.add_argument("--figures", type=int, default=100000)
args = ap.parse_args()
somerange = range(args.figures)
somefile = os.path.join(tempfile.gettempdir(), "matplotlib_figures_not_closed.png")

for i in somerange:
    fig = figure()
    fig.gca().plot(np.random.rand(1000))
    fig.savefig(somefile)
    del fig
    gc.collect()
