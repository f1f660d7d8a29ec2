"""`launcher run`'s command line: launcher's options before a workload's name or `--` (an
unknown one is a usage error with click's did-you-mean); after a built-in workload's name,
the workload's own parser decides which words are its flags, and launcher's own options among
the rest are moved before the name; after `--` every word is the command's."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:  # argparse is imported by the workload's parser, only when one is named
    import argparse


class RunCommand(click.Command):
    """The `run` command: routes launcher's options given after a built-in workload's name."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, route(args, launcher_options(self, ctx)))


def launcher_options(command: click.Command,
                     ctx: click.Context | None = None) -> dict[str, bool]:
    """Every option string of `command` (its help option's names as `ctx` has them) ->
    whether it takes a value."""
    out: dict[str, bool] = {}
    # a context as the command makes its own (its help option's names come from it)
    for p in command.get_params(ctx or click.Context(command, **command.context_settings)):
        if isinstance(p, click.Option):
            for name in (*p.opts, *p.secondary_opts):
                out[name] = not (p.is_flag or p.count)
    return out


def _first_word(args: list[str], options: dict[str, bool]) -> int | None:
    """The index of the first word that is no launcher option or option value: the workload's
    name or the command; None after `--`, at an unknown option (click reports it) or when
    there is none."""
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--" or not word.startswith("-") or word == "-":
            return None if word == "--" else i
        takes = _takes_value(word, options)
        if takes is None:
            return None
        i += 2 if takes else 1
    return None


def _takes_value(word: str, options: dict[str, bool]) -> bool | None:
    """Whether launcher option `word` is followed by its value (False with `--opt=V` or
    `-pV`); None when it is no option of launcher's."""
    if word in options:
        return options[word]
    if word.startswith("--"):
        name = word.split("=", 1)[0]
        return False if options.get(name) else None
    return False if options.get(word[:2]) else None  # -pVALUE


def route(args: list[str], options: dict[str, bool]) -> list[str]:
    """`args` with launcher's options that follow a built-in workload's name moved before it."""
    at = _first_word(args, options)
    if at is None:
        return args
    parser = _parser_of(args[at])
    if parser is None:
        return args
    mine, theirs = split(args[at + 1:], parser, options)
    return [*args[:at], *mine, args[at], *theirs]


def _parser_of(name: str) -> argparse.ArgumentParser | None:
    from launcher.usecases.workloads import parser_of

    return parser_of(name)  # None for a command, or a broken workload file


def split(words: list[str], parser: argparse.ArgumentParser,
          options: dict[str, bool]) -> tuple[list[str], list[str]]:
    """(launcher's options with their values, the workload's words). The workload's own flags
    (and their values) stay the workload's; so does anything else launcher does not know and
    everything after `--`."""
    actions = parser._option_string_actions  # argparse has no public map of its flags
    mine: list[str] = []
    theirs: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            theirs += words[i:]
            break
        name = word.split("=", 1)[0] if word.startswith("--") else word
        if name in actions:
            n = 1 + (0 if "=" in word else _values(actions[name], words[i + 1:]))
            theirs += words[i:i + n]
        elif (takes := _takes_value(word, options)) is not None:
            n = 2 if takes else 1
            mine += words[i:i + n]
        else:
            n = 1
            theirs.append(word)
        i += n
    return mine, theirs


def _values(action: argparse.Action, rest: list[str]) -> int:
    """How many of the following words a workload flag takes as its values."""
    nargs = action.nargs
    if nargs is None:
        return 1
    if isinstance(nargs, int):
        return nargs
    loose = 0
    for word in rest:
        if word.startswith("-") and word != "-":
            break
        loose += 1
    return min(loose, 1) if nargs == "?" else loose
