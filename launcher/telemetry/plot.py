"""Draw RUN_DIR/telemetry.png from its samples: in the background at the end of a run
(`python -m launcher.telemetry RUN_DIR`), or in place through `launcher report --plot`."""

from __future__ import annotations

import json
from pathlib import Path

from launcher.telemetry.summary import plot, read_series


def draw(run_dir: Path) -> bool:
    rows = read_series(run_dir / "telemetry.jsonl")
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
        title = f"{run_dir.name}: {summary.get('diagnosis', '')}"
        estimate = (summary.get("threads_estimate") or {}).get("total")
    except (OSError, ValueError):
        title, estimate = run_dir.name, None
    tmp = run_dir / ".telemetry.png.tmp"
    if len(rows) < 2 or not plot(rows, tmp, title, estimate):
        return False
    tmp.replace(run_dir / "telemetry.png")  # whole or not at all
    return True

