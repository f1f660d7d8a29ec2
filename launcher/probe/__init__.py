"""Reading the host: cgroups, rlimits, kernel limits, GPUs. Every reader takes a root path."""

from launcher.probe.host import HostFacts, probe_host

__all__ = ["HostFacts", "probe_host"]
