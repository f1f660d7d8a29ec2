"""Parse /proc/self/mountinfo and /proc/self/cgroup."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from launcher.errors import HostError


class Mount(NamedTuple):
    mount_point: str
    root: str  # the path inside the filesystem that is mounted there
    fstype: str
    super_options: frozenset[str]


class Membership(NamedTuple):
    hierarchy: str
    controllers: frozenset[str]  # empty for the v2 unified line "0::/path"
    path: str


def _unescape(s: str) -> str:
    return s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace(
        "\\134", "\\"
    )


def parse_mountinfo(path: Path) -> list[Mount]:
    """Cgroup mounts only (cgroup and cgroup2). Missing file: no mounts."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    mounts = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split()
        try:
            sep = fields.index("-")
            root, mount_point = fields[3], fields[4]
            fstype, super_opts = fields[sep + 1], fields[sep + 3]
        except (ValueError, IndexError):
            raise HostError(f"{path}:{n}: malformed mountinfo line {line!r}") from None
        if fstype in ("cgroup", "cgroup2"):
            mounts.append(
                Mount(_unescape(mount_point), _unescape(root), fstype,
                      frozenset(super_opts.split(",")))
            )
    return mounts


def parse_proc_cgroup(path: Path) -> list[Membership]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split(":", 2)
        if len(parts) != 3:
            raise HostError(f"{path}:{n}: malformed cgroup line {line!r}")
        hier, ctrls, cg_path = parts
        controllers = frozenset(c for c in ctrls.split(",") if c and not c.startswith("name="))
        out.append(Membership(hier, controllers, cg_path))
    return out
