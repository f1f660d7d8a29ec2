"""Reading the host: cgroups, rlimits, kernel limits, GPUs. Every reader takes a root path.

Attributes load lazily, so the supervisor can read cgroup counters without importing the rest.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself costs the supervisor's start a few ms
if TYPE_CHECKING:
    from launcher.probe.host import HostFacts, probe_host

__all__ = ["HostFacts", "probe_host"]


def __getattr__(name: str) -> object:
    if name in __all__:
        from launcher.probe import host

        return getattr(host, name)
    raise AttributeError(name)
