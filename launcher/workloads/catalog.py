"""The workloads: those of the `launcher.workloads` entry-point group (launcher's own and
third parties'), then user workloads defined in YAML, which win on a name.

A user workload file (in $LAUNCHER_WORKLOAD_PATH folders or ~/.config/launcher/workloads/):

    name: my-train
    description: my training script
    command: [python3, train.py]     # or a string, split like a shell would
    framework: torch                 # torch | tf | jax | none
    args: [--epochs, "3"]            # default arguments, before the ones given on the command line
"""

from __future__ import annotations

import os
import shlex
from dataclasses import replace
from pathlib import Path

from launcher.defaults import NONE
from launcher.dists import OWN
from launcher.errors import LauncherError
from launcher.frameworks import names as framework_names
from launcher.registry import Registry
from launcher.workloads.workload import Workload

_registry: Registry[Workload] = Registry("workload", group="launcher.workloads",
                                         default="WORKLOAD")


def registered() -> dict[str, Workload]:
    """The workloads of the entry-point group (launcher's own and third parties')."""
    out = {}
    for name, entry in _registry.entries().items():
        w = _registry.get(name)
        out[name] = w if entry.dist == OWN else replace(w, source=entry.dist)
    return out


def _dirs() -> list[Path]:
    dirs = [Path(p) for p in os.environ.get("LAUNCHER_WORKLOAD_PATH", "").split(":") if p]
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return [*dirs, config / "launcher" / "workloads"]


def _load_user(path: Path) -> Workload:
    from launcher.profiles.yamlsrc import load_yaml

    doc = load_yaml(path)
    data = doc.data
    if not isinstance(data, dict):
        raise LauncherError(f"{path}:1: expected a mapping with name and command")
    known = {"name", "description", "command", "framework", "args"}
    for key in data:
        if key not in known:
            raise LauncherError(f"{path}:{doc.line((str(key),))}: {key}: unknown key "
                                f"(known: {', '.join(sorted(known))})")
    command = data.get("command")
    if isinstance(command, str):
        try:
            command = shlex.split(command)
        except ValueError as exc:
            raise LauncherError(f"{path}:{doc.line(('command',))}: command: cannot split it "
                                f"like a shell would: {exc} (got {command!r})") from None
    if not isinstance(command, list) or not command or not all(isinstance(c, str)
                                                               for c in command):
        raise LauncherError(f"{path}:{doc.line(('command',))}: command: expected a list of "
                            f"strings or a command line (got {data.get('command')!r})")
    framework = data.get("framework", NONE)
    if framework not in framework_names():
        raise LauncherError(f"{path}:{doc.line(('framework',))}: framework: must be one of "
                            f"{', '.join(framework_names())} (got {framework!r})")
    args = data.get("args", [])
    if not isinstance(args, list):
        raise LauncherError(f"{path}:{doc.line(('args',))}: args: expected a list")
    return Workload(str(data.get("name", path.stem)), str(data.get("description", "")),
                    framework, None, tuple(command), tuple(str(a) for a in args), str(path))


def catalog() -> dict[str, Workload]:
    found = registered()
    for d in reversed(_dirs()):
        try:
            files = sorted(d.glob("*.y*ml")) if d.is_dir() else []
        except OSError:  # a folder this user cannot read (another user's HOME) holds none
            continue
        for p in files:
            w = _load_user(p)
            found[w.name] = w
    return found


def find_workload(name: str) -> Workload:
    """The workload named `name`, or an error naming the close ones."""
    import difflib

    found = catalog()
    if name in found:
        return found[name]
    close = difflib.get_close_matches(name, list(found), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise LauncherError(f"--workload {name}: no such workload{hint} (`launcher workloads` "
                        f"lists them)")
