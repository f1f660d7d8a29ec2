"""A thread pool as a census names it: a pattern of thread names (what /proc/PID/task/TID/comm
shows, at most 15 characters), a label, and how to stop it growing. A leaf: frameworks and GPU
vendors declare theirs (`thread_pools`), as they declare their variables."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ThreadPool:
    pattern: str  # a regular expression matched at the start of the thread's name
    label: str  # "tf.data", "CUDA driver"
    fix: str = ""  # what stops it growing across cycles ("" where launcher knows none)


# every process's: threads that never named themselves carry their creator's name (Python
# threads before 3.14, OpenMP and OpenBLAS workers)
UNNAMED = "unnamed"
UNNAMED_FIX = ("join or close the threads each cycle starts (executors, pools, data loaders), "
               "or run each cycle in a fresh process")
MEMORY_FIX = ("free what each cycle keeps (models, datasets, caches: `del`, gc.collect(), the "
              "framework's clear_session), or run each cycle in a fresh process")
