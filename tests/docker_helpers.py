"""Helpers for tests that drive the real CLI against the real Docker daemon."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

BASE = os.environ.get("LAUNCHER_TEST_BASE", "launcher-base:bookworm")


def launcher(*args: str, timeout: float = 600, **kw) -> subprocess.CompletedProcess:  # type: ignore[no-untyped-def]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.update(kw.pop("env", {}))
    return subprocess.run([sys.executable, "-m", "launcher", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, **kw)


def profile(tmp: Path, name: str, text: str) -> str:
    path = tmp / f"{name}.yaml"
    path.write_text(text)
    return str(path)


def run_dir_of(stderr: str) -> Path:
    """The run folder `launcher run` names in its last line."""
    import re

    line = next(x for x in stderr.splitlines() if "telemetry and summary in" in x)
    return Path(re.search(r"`launcher report (.+?)`", line).group(1))  # type: ignore[union-attr]


def compose_bin() -> str:
    return str(Path(sys.executable).parent / "docker-compose")
