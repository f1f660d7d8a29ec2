"""The thread model corrected by this host's calibration (`launcher calibrate`)."""

from __future__ import annotations

from typing import Any

from launcher.caps.threads import ThreadEstimate, estimate_threads
from launcher.frameworks.base import NOT_HERE, Installed, Settings
from launcher.probe.host import HostFacts


def calibrated(framework: str, settings: Settings, *, cpus: int, gpus: int, facts: HostFacts,
               installed: Installed = NOT_HERE) -> ThreadEstimate:
    """The built-in model, corrected by this host's calibration when one was measured for this
    framework, its installed version and this many CPUs: the measured peak minus the model at
    the settings it was measured under is added to the model at these settings. The CPU side
    (measured with no GPU visible, by the current method) moves the estimate either way; a
    GPU-side measurement only raises the GPU terms, never lowers them. Each is compared with
    the model's figure for what the probe reaches: the pools only a real program grows (the
    model's beyond_probe) stay in either way."""
    from launcher.probe.calibration import METHOD, user_path

    model = estimate_threads(framework, settings, cpus=cpus, gpus=gpus, installed=installed)
    entries = [e for e in facts.calibration if e.get("framework") == framework and
               e.get("cpus") == cpus and (e.get("gpus") or e.get("method", 1) >= METHOD)]
    if not entries:
        return model

    # An image's calibration was measured with the framework it holds, and where the version
    # cannot be read (a fixture root, the supervisor's isolated interpreter) none is refused.
    version, mine = installed.version, str(user_path())
    fits = [(e.get("file") == mine, e.get("date", ""), i, e) for i, e in enumerate(entries)
            if version is None or e.get("version") == version or e.get("file") != mine]
    if not fits:
        return ThreadEstimate(model.per_process, model.breakdown,
                              f"{model.source}; the calibration is for {framework} "
                              f"{entries[0].get('version')}, installed {version}")

    def newest(on_gpu: bool) -> dict[str, Any] | None:
        side = [f for f in fits if bool(f[3].get("gpus", 0)) == on_gpu]
        return max(side, key=lambda f: f[:3])[3] if side else None  # this host's, the newest

    cpu_side = newest(on_gpu=False)
    if version is None and (cpu_side or newest(on_gpu=True) or {}).get("version"):
        # the version is unknown here but the calibration names it: its model is the basis,
        # not the largest one (whose probe figure would cancel what only a real program grows)
        named = cpu_side or newest(on_gpu=True) or {}
        installed = Installed(str(named["version"]), str(named.get("build", installed.build)))
        model = estimate_threads(framework, settings, cpus=cpus, gpus=gpus,
                                 installed=installed)

    def offset(entry: dict[str, Any], seen: int) -> int:
        at = estimate_threads(framework, Settings.of(entry.get("settings", {})), cpus=cpus,
                              gpus=seen, installed=installed, probe_only=True)
        return int(entry["peak"]) - at.per_process

    parts, said = dict(model.breakdown), []
    cpu_offset = offset(cpu_side, 0) if cpu_side else 0
    if cpu_side:
        parts["calibration"] = cpu_offset
        said.append(f"calibrated on this host, {framework} {cpu_side.get('version')}, "
                    f"{cpu_side.get('date', '?')}")
    gpu_side = newest(on_gpu=True) if gpus else None
    if gpu_side:
        raise_by = max(0, offset(gpu_side, int(gpu_side.get("gpus", 1))) - cpu_offset)
        parts["gpu calibration"] = raise_by
        said.append(f"{'calibrated on this host' if not said else 'GPU side'} with "
                    f"{gpu_side.get('gpus')} {gpu_side.get('vendor', '')} GPU "
                    f"(driver {gpu_side.get('driver', '?')}), {gpu_side.get('date', '?')}")
    if not said:  # only a GPU-side measurement, and this run sees no GPU
        return model
    parts = {k: v for k, v in parts.items() if v or k == "main"}
    return ThreadEstimate(sum(parts.values()), parts, "; ".join(said))
