"""Built-in workloads and user workloads defined in YAML.

A user workload file (in $LAUNCHER_WORKLOAD_PATH folders or ~/.config/launcher/workloads/):

    name: my-train
    description: my training script
    command: [python3, train.py]     # or a string, split like a shell would
    framework: torch                 # torch | tf | jax | none
    args: [--epochs, "3"]            # default arguments, before the ones given on the command line
"""

from __future__ import annotations

import argparse
import importlib
import os
import shlex
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from launcher.errors import LauncherError
from launcher.frameworks import names as framework_names


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    framework: str
    module: str | None = None  # built-in: run as `python -m MODULE`, which has `parser()`
    command: tuple[str, ...] = ()  # user: the command itself
    args: tuple[str, ...] = ()
    source: str = "built-in"
    extra_threads: int = 0  # besides its framework process: a driver, its own sampler

    def module_object(self) -> Any:
        return importlib.import_module(self.module) if self.module else None

    def parser(self) -> argparse.ArgumentParser | None:
        """The workload's own argument parser (built-ins), the one source of its flags."""
        if self.module is None:
            return None
        return importlib.import_module(self.module).parser()  # type: ignore[no-any-return]

    def flags(self) -> dict[str, str]:
        """`--flag METAVAR` -> help, from the parser."""
        ap = self.parser()
        if ap is None:
            return {}
        out = {}
        for action in ap._actions:  # argparse has no public iterator over its actions
            if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
                continue
            flag = action.option_strings[-1]
            if action.choices:
                flag += " " + "|".join(map(str, action.choices))
            elif action.nargs != 0:
                flag += " " + (action.metavar or action.dest.upper())
            out[flag] = action.help or ""
        return out

    def to_json(self) -> dict:  # type: ignore[type-arg]
        return {**asdict(self), "flags": self.flags()}

    def argv(self, extra: list[str], python: str) -> list[str]:
        base = [python, "-m", self.module] if self.module else list(self.command)
        return [*base, *self.args, *extra]


BUILTIN = {
    "stress-jax": Workload(
        "stress-jax", "JAX environment stress test: largest stable num_envs for this hardware",
        "jax", "launcher.workloads.stress_jax", extra_threads=1),  # its thread sampler
    "pytorch-phase3": Workload(
        "pytorch-phase3", "PyTorch autotuner: vectorized_envs x batch_size, samples/s and peak "
                          "memory, best stable point", "torch",
        "launcher.workloads.pytorch_phase3"),
    "tf-train": Workload(
        "tf-train", "TensorFlow k-fold training, one fresh process per fold, resumable", "tf",
        "launcher.workloads.tf_train", extra_threads=1),  # the driver (no TF) beside a fold
}


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
    framework = data.get("framework", "none")
    if framework not in framework_names():
        raise LauncherError(f"{path}:{doc.line(('framework',))}: framework: must be one of "
                            f"{', '.join(framework_names())} (got {framework!r})")
    args = data.get("args", [])
    if not isinstance(args, list):
        raise LauncherError(f"{path}:{doc.line(('args',))}: args: expected a list")
    return Workload(str(data.get("name", path.stem)), str(data.get("description", "")),
                    framework, None, tuple(command), tuple(str(a) for a in args), str(path))


def catalog() -> dict[str, Workload]:
    found = dict(BUILTIN)
    for d in reversed(_dirs()):
        if d.is_dir():
            for p in sorted(d.glob("*.y*ml")):
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
