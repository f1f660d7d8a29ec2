"""A job's summary from its ledger: chunks done, failed, retried and split (one sentence per
split and failure), wall time against the ideal, per-slot use, the peak memory per chunk, and
GPU use per GPU when GPUs were sampled."""

from __future__ import annotations

import math
import statistics
from typing import Any

from launcher.jobs.ledger import Ledger
from launcher.units import format_size


def summarize(ledger: Ledger, concurrency: int, wall_s: float | None = None,
              busy: dict[str, float] | None = None,
              gpu_util: dict[int, float] | None = None) -> dict[str, Any]:
    chunks = ledger.chunks()
    counts = ledger.counts()
    done = [c for c in chunks if c.state == "done"]
    durations = [c.ended - c.started for c in done if c.started and c.ended]
    peaks = [c.peak_bytes for c in done if c.peak_bytes]
    events = ledger.events()
    median = statistics.median(durations) if durations else None
    ideal = math.ceil(len(done) / max(1, concurrency)) * median if median else None
    out: dict[str, Any] = {
        "chunks": len([c for c in chunks if c.state != "split"]),
        "counts": counts,
        "retried": len({e["chunk"] for e in events if e["kind"] == "retry"}),
        "split": counts["split"],
        "items_done": sum(c.size for c in done),
        "concurrency": concurrency,
        "median_chunk_s": round(median, 3) if median else None,
        "wall_s": round(wall_s, 3) if wall_s is not None else None,
        "ideal_s": round(ideal, 3) if ideal else None,
        "wall_over_ideal": round(wall_s / ideal, 3) if wall_s and ideal else None,
        "slot_use": {k: round(v / wall_s, 3) for k, v in (busy or {}).items()}
        if wall_s else {},
        "peak_bytes": {"max": max(peaks), "median": int(statistics.median(peaks))}
        if peaks else None,
        "gpu_util_percent": gpu_util or {},
        "splits": [e["text"] for e in events if e["kind"] == "split"],
        "failures": [{"chunk": c.id, "items": [c.start, c.end], "diagnosis": c.diagnosis,
                      "log_tail": c.log_tail} for c in chunks if c.state == "failed"],
    }
    return out


def lines(s: dict[str, Any]) -> list[str]:
    c = s["counts"]
    out = [f"{c['done']} of {s['chunks']} chunks done ({s['items_done']} items), "
           f"{c['failed']} failed, {s['retried']} retried, {s['split']} split"
           + (f", {c['pending']} pending" if c["pending"] else "")
           + (f", {c['running']} running" if c["running"] else "")]
    if s["wall_s"] is not None and s["ideal_s"]:
        out.append(f"wall time {s['wall_s']:.1f}s; ideal {s['ideal_s']:.1f}s (ceil(chunks / "
                   f"{s['concurrency']}) x the median chunk {s['median_chunk_s']:.2f}s): "
                   f"{s['wall_over_ideal']:.2f}x")
    if s["slot_use"]:
        out.append("slot use: " + ", ".join(f"{k} {v:.0%}" for k, v in s["slot_use"].items()))
    if s["peak_bytes"]:
        out.append(f"peak memory per chunk: max {format_size(s['peak_bytes']['max'])}, median "
                   f"{format_size(s['peak_bytes']['median'])}")
    if s["gpu_util_percent"]:
        out.append("GPU use: " + ", ".join(f"GPU {g} {u:.0f}%" for g, u in
                                           s["gpu_util_percent"].items()))
    out += s["splits"]
    for f in s["failures"]:
        out.append(f"chunk {f['chunk']} (items {f['items'][0]}-{f['items'][1]}) failed: "
                   f"{f['diagnosis']}")
    return out
