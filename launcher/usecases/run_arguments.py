"""`launcher run`'s words: a built-in workload's own parser reads its arguments first, a user
workload's --help says what it runs, and a first word that is no workload is a command that
must be there (or a near miss of a workload's name)."""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

from launcher.errors import CommandNotExecutable, CommandNotFound, LauncherError
from launcher.usecases.run_request import RunRequest
from launcher.workloads.catalog import Workload

if TYPE_CHECKING:  # argparse comes with a workload's parser, only when one is named
    import argparse


def parse_workload_args(parser: argparse.ArgumentParser, args: list[str]) -> int | None:
    """A built-in workload's own parser reads its arguments here first: None when they parse,
    else the exit status of its help (0) or of its usage error (2), which it printed."""
    try:
        parser.parse_args(args)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    return None


def user_workload_help(w: Workload) -> str:
    """A user workload's --help: what it runs, from where; its command's own --help is a
    command to paste."""
    import shlex

    from launcher.defaults import NONE
    from launcher.flags import argv_of

    command = shlex.join([*w.command, *w.args])
    framework = argv_of(RunRequest(framework=w.framework)) if w.framework != NONE else []
    return (f"{w.name}: {w.description or '(no description)'}\n"
            f"  defined in {w.source}\n"
            f"  runs: {command} [ARGS...]  (framework {w.framework})\n"
            f"every word after the name is the command's; its own --help: "
            f"`{shlex.join(['launcher', 'run', *framework, '--', *w.command, *w.args, '--help'])}`")


def check_not_a_typo(word: str, names: list[str]) -> None:
    """A first word that is no workload, no command here, and close to a workload name."""
    if "/" in word or shutil.which(word):
        return
    import difflib

    close = difflib.get_close_matches(word, names, n=1, cutoff=0.75)
    if close:
        raise LauncherError(f"{word!r} is neither a workload nor a command on PATH; did you "
                            f"mean the workload {close[0]!r}? (`launcher workloads` lists them)")


def check_on_path(word: str, path: str | None, cwd: str | None) -> None:
    """A command run on this host that is not there: one line and 127, before anything; one
    that is there but cannot be executed: 126 and the shell's words."""
    if "/" in word:
        path = os.path.join(cwd or os.getcwd(), word)
        found = os.path.isfile(path) and os.access(path, os.X_OK)
        if not found and os.path.exists(path):  # bash: "Is a directory", "Permission denied"
            why = "Is a directory" if os.path.isdir(path) else "Permission denied"
            raise CommandNotExecutable(f"cannot run {word!r}: {why}")
    else:
        found = shutil.which(word, path=path) is not None
    if not found:
        what = "no such executable file" if "/" in word else "neither a workload nor a command " \
                                                               "on PATH"
        raise CommandNotFound(f"cannot run {word!r}: {what} (`launcher workloads` lists the "
                              f"workloads; a command inside an image needs --image IMG)")

