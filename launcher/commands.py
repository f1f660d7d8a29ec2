"""A sub-command a plugin adds (entry-point group `launcher.commands`; the entry's name is its
place: `ray-node` under `jobs` is `jobs.ray-node`). Its flags are its request's fields
(launcher/flags.py); it returns what to say, in words and as data for --json. A leaf: the
command line is launcher's (cli/main.py prints and exits), the work is the plugin's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Said:
    lines: list[str]  # for people, on stdout
    data: dict[str, Any] = field(default_factory=dict)  # the same, for --json
    notes: list[str] = field(default_factory=list)  # for people, on stderr (either way)
    status: int = 0


@dataclass(frozen=True)
class Command:
    help: str  # the first line is the short help in the group's list
    request: type  # a dataclass whose fields carry flags (launcher.flags.flag)
    run: Callable[[Any], Said]
