"""A plugin's sub-command (launcher/commands.py) on the command line: its request's flags and
--json; what it says printed as lines or as JSON, its status the exit status."""

from __future__ import annotations

from typing import Any

import click

from launcher.cli.declare import JSON, command
from launcher.cli.output import print_json, say


def plugin_command(name: str, entry: str) -> click.Command:
    from launcher.usecases.names import plugin_command as load

    declared = load(entry)

    def handler(request: Any, *, as_json: bool) -> int:
        said = declared.run(request)
        for note in said.notes:
            say(note)
        if as_json:
            print_json(said.data)
        else:
            for line in said.lines:
                print(line)
        return said.status

    return command(name, declared.request, handler, help=declared.help, own=(JSON,))
