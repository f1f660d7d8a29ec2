"""summary.json from telemetry.jsonl: peaks, limits, headroom, exit status, diagnosis."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from launcher.telemetry.sampler import LIMIT_OF


def read_series(path: Path) -> list[dict[str, Any]]:
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            rows.append(json.loads(line))
    return rows


def summarize(rows: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    peaks: dict[str, Any] = {}
    estimate = (meta.get("threads_estimate") or {}).get("total")
    for key, limit_key in LIMIT_OF.items():
        values = [r[key] for r in rows if r.get(key) is not None]
        limits = [r[limit_key] for r in rows if r.get(limit_key)]
        peak = max(values) if values else None
        limit = limits[-1] if limits else None
        peaks[key] = {"peak": peak, "limit": limit,
                      "headroom": (limit - peak) if peak is not None and limit else None,
                      "percent": round(100 * peak / limit, 1) if peak and limit else None}
    peaks["threads"]["estimate"] = estimate  # the plan's, for the whole container or tree
    return {**meta, "samples": len(rows), "duration_s": rows[-1]["t"] if rows else 0.0,
            "peaks": peaks}


def plot(rows: list[dict[str, Any]], path: Path, title: str,
         threads_estimate: int | None = None) -> bool:
    """telemetry.png: each series against its limit. False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    t = [r["t"] for r in rows]
    panels = [("threads", "pids_max", "threads / pids", 1, "tasks"),
              ("maps", "max_map_count", "memory maps (largest process)", 1, "maps"),
              ("rss_bytes", "memory_limit_bytes", "RSS", 1 / 2**20, "MiB")]
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 7), sharex=True)
    for ax, (key, limit_key, label, scale, unit) in zip(axes, panels, strict=True):
        ax.plot(t, [(r.get(key) or 0) * scale for r in rows], label=label, color="tab:blue")
        if key == "threads" and any(r.get("pids_current") is not None for r in rows):
            ax.plot(t, [(r.get("pids_current") or 0) for r in rows], label="pids.current",
                    color="tab:green")
        limits = [r.get(limit_key) for r in rows]
        if any(limits):
            ax.plot(t, [(v or float("nan")) * scale for v in limits], "--", color="tab:red",
                    label=limit_key)
            ax.axhline(0.8 * (next(v for v in reversed(limits) if v) * scale), ls=":",
                       color="tab:orange", label="80%")
        if key == "threads" and threads_estimate:
            ax.axhline(threads_estimate, ls="-.", color="tab:purple",
                       label=f"plan's estimate {threads_estimate}")
        ax.set_ylabel(unit)
        ax.set_title(label, fontsize=9)
        ax.legend(fontsize=7, loc="upper left")
    axes[-1].set_xlabel("seconds")
    import textwrap

    fig.suptitle(textwrap.fill(title, 110), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90, format="png")
    plt.close(fig)
    return True
