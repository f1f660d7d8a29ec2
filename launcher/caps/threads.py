"""How many threads (= tasks, = pids) one process of each framework starts, at its peak.

The peak, not the calm: from start through import, a first operation, compilation and the
first training steps, sampled every millisecond. Each framework's terms, and the versions they
were measured on, live in its module under `launcher/frameworks/`. `launcher calibrate`
measures the probe's peak (launcher.workloads.threadprobe) on any host, and `caps.calibrated`
corrects this model by it. Checked against real imports and the reference workloads by
tests/test_thread_estimate.py, the model's terms by tests/test_frameworks.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from launcher.frameworks import get as get_framework
from launcher.frameworks import origin
from launcher.frameworks.base import NOT_HERE, Installed, Settings


@dataclass(frozen=True)
class ThreadEstimate:
    per_process: int
    breakdown: dict[str, int]
    source: str


def estimate_threads(framework: str, settings: Settings, *, cpus: int, gpus: int = 0,
                     installed: Installed = NOT_HERE, probe_only: bool = False) -> ThreadEstimate:
    """Peak threads of one process; `cpus` is the CPU affinity the process will have, `gpus`
    the GPUs it sees, `installed` the framework's version and build where it will run (unknown:
    the model errs high); `probe_only`: what the calibration probe reaches, to compare a
    calibration with."""
    est = get_framework(framework).estimate(settings, cpus, gpus, installed, probe_only,
                                            origin=origin(framework))
    return ThreadEstimate(sum(est.parts.values()), est.parts, est.source)
