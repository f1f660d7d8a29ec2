"""The rlimits launcher sets, by the name a profile's ulimits use. Standard library only: the
supervisor in an image applies them, the native engine fits them to the hard limits it has."""

from __future__ import annotations

import resource

RLIMITS = {
    "nproc": resource.RLIMIT_NPROC,
    "nofile": resource.RLIMIT_NOFILE,
    "stack": resource.RLIMIT_STACK,
    "memlock": resource.RLIMIT_MEMLOCK,
}
