"""What a workload is: its name, framework, and how to start it (a module's parser, or a
command). A workload module defines `WORKLOAD`, one of these, named by one line of the
`launcher.workloads` entry-point group."""

from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass, field, fields
from typing import Any

from launcher.checks import Check
from launcher.keys import Key


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
    # what it adds to profiles: its keys (section -> key -> Key), the variables it reads (name
    # -> why, in the managed table), and which key sets which variable before it starts
    profile_keys: dict[str, dict[str, Key]] = field(default_factory=dict, compare=False)
    variables: dict[str, str] = field(default_factory=dict, compare=False)
    from_keys: dict[str, str] = field(default_factory=dict, compare=False)  # KEY -> VARIABLE
    # its verdict checks (launcher/checks.py): on its own keys, so they run for any profile
    checks: tuple[Check, ...] = field(default=(), compare=False)

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
        plain = {f.name: getattr(self, f.name) for f in fields(self)
                 if f.name not in ("profile_keys", "variables", "from_keys")}
        return {**plain, "flags": self.flags(), "variables": dict(self.variables),
                "profile_keys": [f"{s}.{k}" for s, keys in self.profile_keys.items()
                                 for k in keys]}

    def argv(self, extra: list[str], python: str) -> list[str]:
        base = [python, "-m", self.module] if self.module else list(self.command)
        return [*base, *self.args, *extra]
