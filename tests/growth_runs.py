"""Runs for the growth tests: recorded ones made up (a boundary row a cycle, `rows_of`) and
real ones through `launcher run` (examples/growth/leak.py under a profile of the test's,
natively), and the watch's lines it said."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from launcher.telemetry import growth
from tests.conftest import ROOT

LEAK = ROOT / "examples/growth/leak.py"


def launcher_run(tmp_path: Path, profile: str, *args: str, flags: tuple[str, ...] = (),
                 timeout: float = 120) -> tuple[int, str, dict[str, Any]]:
    """`launcher run --runtime native` of leak.py with `args` under `profile` (a base
    profile's keys): its exit status, its output (stdout and stderr), its summary.json."""
    prof = tmp_path / "p.yaml"
    prof.write_text(f"name: p\nextends: base\n{profile}")
    runs = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, "-m", "launcher", "run", "--runtime", "native", "--profile",
         str(prof), "--name", "r", *flags, "--", sys.executable, str(LEAK), *args],
        capture_output=True, text=True, timeout=timeout, cwd=tmp_path,
        env={**os.environ, "LAUNCHER_RUNS_DIR": str(runs)})
    summary = json.loads((runs / "r/summary.json").read_text())
    return proc.returncode, proc.stdout + proc.stderr, summary


def growth_said(out: str) -> list[str]:
    """The growth watch's lines in a run's output."""
    return [ln for ln in out.splitlines() if ln.startswith("launcher: growth: ")]


def rows_of(floors: list[float], *, key: str = "threads", limit: float = 50,
            excess: float = 0.0, seconds: float = 1.0, unit: str = "fold",
            census: list[dict[str, dict[str, int]]] | None = None) -> list[dict[str, Any]]:
    """A recorded run: a boundary row at each cycle's start (its floor) and a sample in the
    middle (floor + excess)."""
    limit_key = growth.SERIES[key].limit_key
    rows, t = [], 0.0
    for i, f in enumerate(floors):
        mark: dict[str, Any] = {"t": t, key: f, limit_key: limit,
                                "cycle": {"unit": unit, "n": i + 1, "total": None}}
        if census:
            mark["census"] = census[i]
        rows += [mark, {"t": t + seconds / 2, key: f + excess, limit_key: limit}]
        t += seconds
    return rows


def threads_trend(rows: list[dict[str, Any]], **kw: Any) -> growth.Trend | None:
    """The threads' trend of a recorded run, if the fit finds one."""
    return next((t for t in growth.cycle_trends(rows, **kw)[2] if t.series == "threads"), None)
