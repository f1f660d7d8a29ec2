"""Host trees for tests: files written under a root path, and the v2-limited fixture with
the rlimits a test needs."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import ROOT

LIMITED = ROOT / "tests/fixtures/hosts/v2-limited"  # 8 CPUs, pids.max 77 (3 running), quota 1.5
V2_MOUNT = "29 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"


def host(root: Path, files: dict[str, str]) -> Path:
    """Write `files` (path -> text; a path ending in / is an empty directory) under root."""
    for name, text in files.items():
        path = root / name
        if name.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return root


def limited_host(dest: Path, stack: str | None = None, address: str | None = None,
                 data: str = "unlimited") -> Path:
    """A copy of v2-limited at `dest` with RLIMIT_STACK and RLIMIT_AS as given (bytes or
    unlimited; None: the fixture's) and RLIMIT_DATA added."""
    shutil.copytree(LIMITED, dest)
    limits = dest / "proc/self/limits"
    text = limits.read_text()
    if stack is not None:
        text = text.replace("Max stack size            8388608              unlimited",
                            f"Max stack size            {stack:<20} unlimited")
    if address is not None:
        text = text.replace("Max address space         unlimited            unlimited",
                            f"Max address space         {address:<20} unlimited")
    limits.write_text(text + f"Max data size             {data:<20} unlimited            bytes\n")
    return dest
