"""What the kernel says about this process, read from /proc under a root path: standard
library only and no dataclasses, as the supervisor imports it at every container start."""

from __future__ import annotations

from pathlib import Path


def proc_status(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        key, _, value = line.partition(":")
        out[key] = value.strip()
    return out


def read_nproc_exempt(root: Path) -> bool:
    """Whether RLIMIT_NPROC does not bind this process: the kernel exempts root of the initial
    user namespace, and a task with CAP_SYS_ADMIN or CAP_SYS_RESOURCE there (copy_process in
    kernel/fork.c). A container's root without a user namespace is that root; a rootless one
    is not."""
    try:
        uid_map = (root / "proc/self/uid_map").read_text().split()
        status = proc_status(root / "proc/self/status")
        uid = int(status["Uid"].split()[0])
        cap_eff = int(status.get("CapEff", "0"), 16)
    except (OSError, KeyError, ValueError, IndexError):
        return False
    initial = uid_map[:3] == ["0", "0", "4294967295"]
    return initial and (uid == 0 or bool(cap_eff & (1 << 21 | 1 << 24)))
