"""A job's summary from its ledger: chunks done, failed, retried and split (one sentence per
split and failure), the job's totals beside what this run did (a resumed run's wall time is
set against the ideal of the chunks it ran, not the job's), per-slot use, the peak memory per
chunk, and GPU use per GPU when GPUs were sampled."""

from __future__ import annotations

import math
import statistics
from typing import Any

from launcher.jobs.ledger import Ledger
from launcher.units import format_size


def summarize(ledger: Ledger, concurrency: int, *, wall_s: float | None = None,
              busy: dict[str, float] | None = None,
              gpu_util: dict[int, float] | None = None,
              since: float | None = None) -> dict[str, Any]:
    """`since`: when this run started (time.time()); its figures count the chunks it started."""
    chunks = ledger.chunks()
    counts = ledger.counts()
    done = [c for c in chunks if c.state == "done"]
    ran = [c for c in done if since is None or (c.started or 0) >= since]
    durations = [c.ended - c.started for c in ran if c.started and c.ended]
    peaks = [c.peak_bytes for c in done if c.peak_bytes]
    events = ledger.events()
    median = statistics.median(durations) if durations else None
    ideal = math.ceil(len(ran) / max(1, concurrency)) * median if median else None
    out: dict[str, Any] = {
        "this_run": {"chunks_done": len(ran), "items_done": sum(c.size for c in ran),
                     "failed": len([c for c in chunks if c.state == "failed" and (
                         since is None or (c.started or 0) >= since)])},
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
    if s["wall_s"] is not None:
        out.append(run_line(s))
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


def run_line(s: dict[str, Any]) -> str:
    """This run's chunks and wall time, against the ideal for those chunks."""
    run = s.get("this_run") or {}
    n = run.get("chunks_done", 0)
    head = (f"this run: {n} chunks done ({run.get('items_done', 0)} items) in wall time "
            f"{s['wall_s']:.1f}s")
    if not s["ideal_s"]:
        return head + "; no chunk finished, so no ideal to compare with"
    return (head + f"; ideal {s['ideal_s']:.1f}s (ceil({n} chunks / {s['concurrency']}) x the "
            f"median chunk {s['median_chunk_s']:.2f}s): {s['wall_over_ideal']:.2f}x")
