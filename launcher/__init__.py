"""launcher: run ML workloads inside correctly capped containers."""

__version__ = "0.1.0"
