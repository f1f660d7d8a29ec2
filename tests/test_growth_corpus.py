"""Leaks reproduced from public bug reports (examples/growth/corpus/), each under the limit
that kills it, through `launcher run` as a user would run them: the growth is said before the
death, and the death is named with its limit and the growth; the controls (reports whose leak
is fixed in the versions installed) get no growth line. How far ahead each was said is the
benchmark's (benchmarks/growth.py --corpus): a shared CI host's timing is not a test's."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, need

CORPUS = ROOT / "examples/growth/corpus"
ENTRIES = json.loads((CORPUS / "corpus.json").read_text())
MODULES = {"tensorflow": "tensorflow", "torch": "torch", "jax": "jax", "none": None}


def _run(tmp_path: Path, entry: dict[str, Any]) -> tuple[int, str, dict[str, Any]]:
    for module in (MODULES[entry["framework"]], *entry.get("needs", ())):
        if module:
            need(module, None if importlib.util.find_spec(module) else "not installed")
    name = Path(entry["script"]).stem.replace("_", "-")
    limits = "".join(f"  {k}: {v}\n" for k, v in entry["limit"].items())
    prof = tmp_path / f"{name}.yaml"
    prof.write_text(f"name: {name}\nextends: base\nlimits:\n{limits}")
    runs = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, "-m", "launcher", "run", "--runtime", "native", "--profile", str(prof),
         "--name", "r", "--", sys.executable, entry["script"], *map(str, entry.get("args", []))],
        capture_output=True, text=True, timeout=300, cwd=CORPUS,
        env={**os.environ, "LAUNCHER_RUNS_DIR": str(runs)})
    summary = json.loads((runs / "r/summary.json").read_text())
    return proc.returncode, proc.stdout + proc.stderr, summary


@pytest.mark.parametrize("entry", [e for e in ENTRIES if not e["control"] and e.get("ci", True)],
                         ids=lambda e: Path(e["script"]).stem)
def test_a_reported_leak_is_said_before_it_dies_and_its_death_named(tmp_path, entry):
    rc, out, summary = _run(tmp_path, entry)
    g = summary["growth"]
    if "memory" in entry["limit"]:
        need("a memory cgroup of the run's own (root on cgroup v1, or a delegated v2)",
             None if "memory" in summary["engine"]["enforced"] else "launcher could not make one")
    # a library that catches the failure and retries may exit 0: its limit is named all the same
    assert rc == entry["exits"] if "exits" in entry else rc != 0, out[-3000:]
    assert g["said"], out[-3000:]
    assert g["said"][0]["t"] < summary["duration_s"], g["said"]
    assert "a higher limit only delays it" in summary["diagnosis"], summary["diagnosis"]
    for words in entry.get("named", ()):  # the right resource, what grew, and the fix
        assert words in summary["diagnosis"], (words, summary["diagnosis"])


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e["control"] and e.get("ci", True)],
                         ids=lambda e: Path(e["script"]).stem)
def test_a_fixed_report_is_no_leak(tmp_path, entry):
    rc, out, summary = _run(tmp_path, entry)
    assert summary["growth"]["said"] == [], summary["growth"]["said"]
    assert rc == 0, out[-3000:]
