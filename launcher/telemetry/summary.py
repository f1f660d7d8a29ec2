"""summary.json from telemetry.jsonl: peaks, limits, headroom, GPU use, exit status, diagnosis."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Tuple

from launcher.telemetry.sampler import LIMIT_OF

GpuKey = Tuple[str, int]  # (vendor, index) as the sampler writes them


def read_series(path: Path) -> list[dict[str, Any]]:
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            rows.append(json.loads(line))
    return rows


def summarize(rows: list[dict[str, Any]], meta: dict[str, Any],
              gpu_names: Mapping[GpuKey, str] | None = None,
              pids_peak: int | None = None) -> dict[str, Any]:
    """The summary of a run's samples; `gpu_names` ({(vendor, index): model}, from the host's
    facts) names the GPUs, which the samples identify by index only. `pids_peak` is the
    kernel's own pids.peak of the run's cgroup: exact, where the samples may miss a burst
    of threads between two of them."""
    peaks: dict[str, Any] = {}
    estimate = (meta.get("threads_estimate") or {}).get("total")
    for key, limit_key in LIMIT_OF.items():
        values = [r[key] for r in rows if r.get(key) is not None]
        limits = [r[limit_key] for r in rows if r.get(limit_key)]
        peaks[key] = _against(max(values) if values else None, limits[-1] if limits else None)
    peaks["threads"]["estimate"] = estimate  # the plan's, for the whole container or tree
    if pids_peak is not None:
        with_kernel_pids_peak(peaks, pids_peak)
    return {**meta, "samples": len(rows), "duration_s": rows[-1]["t"] if rows else 0.0,
            "peaks": peaks, "gpus": gpu_peaks(rows, gpu_names or {})}


def with_kernel_pids_peak(peaks: dict[str, Any], pids_peak: int) -> None:
    """The kernel's own pids.peak of the run's cgroup beside the sampled one: exact, where
    the samples may miss a burst of threads between two of them."""
    sampled = peaks.get("pids_current") or {"peak": None, "limit": None}
    peaks["pids_current"] = {**_against(max(sampled["peak"] or 0, pids_peak),
                                        sampled["limit"]), "kernel_peak": pids_peak}


def _against(peak: int | None, limit: int | None) -> dict[str, Any]:
    """A peak with its limit, headroom and the share of the limit it used."""
    return {"peak": peak, "limit": limit,
            "headroom": (limit - peak) if peak is not None and limit else None,
            "percent": round(100 * peak / limit, 1) if peak and limit else None}


def gpu_series(rows: list[dict[str, Any]]) -> dict[GpuKey, list[dict[str, Any] | None]]:
    """Each GPU's reading in each sample (None where a sample lacks it), in GPU order."""
    keys = sorted({(g["vendor"], g["gpu"]) for r in rows for g in r.get("gpus") or ()})
    out: dict[GpuKey, list[dict[str, Any] | None]] = {k: [] for k in keys}
    for r in rows:
        seen = {(g["vendor"], g["gpu"]): g for g in r.get("gpus") or ()}
        for k in keys:
            out[k].append(seen.get(k))
    return out


def gpu_peaks(rows: list[dict[str, Any]], names: Mapping[GpuKey, str]) -> list[dict[str, Any]]:
    """Per GPU: peak and mean utilisation, peak memory used against the total, samples."""
    out = []
    for (vendor, index), readings in gpu_series(rows).items():
        got = [g for g in readings if g is not None]
        util = [g["util_percent"] for g in got]
        used = max(g["mem_used_bytes"] for g in got)
        total = got[-1]["mem_total_bytes"]
        out.append({"vendor": vendor, "gpu": index, "name": names.get((vendor, index)),
                    "samples": len(got), "util_peak_percent": max(util),
                    "util_mean_percent": round(sum(util) / len(util), 1),
                    "memory_peak_bytes": used, "memory_total_bytes": total,
                    "memory_percent": round(100 * used / total, 1) if total else None})
    return out
