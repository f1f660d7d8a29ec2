"""Telemetry of a run: a 1 Hz sampler of the workload's process tree and cgroup, a summary,
and a plot of each series against its limit."""
