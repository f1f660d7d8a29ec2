"""The `launcher` command, in click alone: a group whose commands are built when one is used,
each from its module's `COMMAND` (its flags declared once, on its request: launcher/flags.py),
plus the sub-commands plugins add (entry-point group `launcher.commands`). `launcher --help`
lists them from the table below, importing none of them."""

from __future__ import annotations

from typing import Any

import click

HELP = ("Run ML workloads (JAX, PyTorch, TensorFlow) inside correctly capped containers.\n\n"
        "A hardware profile is resolved against the host's real cgroup limits into thread, "
        "memory and allocator settings that are in place before Python starts.\n\n"
        "Start with `launcher doctor`, then `launcher plan --profile auto`.")

# name -> (the module whose COMMAND it is, or a group's table; the line `--help` lists)
Table = dict[str, tuple[Any, str]]
PROFILES: Table = {
    "list": ("launcher.cli.profiles_cmd:LIST", "List the profiles found (user folders first, "
                                               "then the shipped ones)."),
    "show": ("launcher.cli.profiles_cmd:SHOW", "Show a profile after `extends` is merged, with "
                                               "the file and line of every value."),
    "validate": ("launcher.cli.profiles_cmd:VALIDATE", "Check profiles; print one line per "
                                                       "error, exit 1 if any is invalid."),
}
JOBS: Table = {
    "plan": ("launcher.cli.jobs_cmd:PLAN", "How the job is cut and how many chunks run at "
                                           "once, and which bound decides."),
    "run": ("launcher.cli.jobs_cmd:RUN", "Run the chunks not finished yet, each under the "
                                         "caps; rerun to go on after a stop."),
    "render": ("launcher.cli.jobs_cmd:RENDER", "Write the job for a cluster, as a render "
                                               "target has it (--target)."),
    "status": ("launcher.cli.jobs_cmd:STATUS", "Chunks done, pending, running (where, for how "
                                               "long), failed (why) and split."),
}
COMMANDS: Table = {
    "doctor": ("launcher.cli.doctor_cmd:COMMAND", "Report this host's real limits (cgroup, "
                                                  "rlimits, kernel, GPUs) and the first to bite."),
    "plan": ("launcher.cli.plan_cmd:COMMAND", "Resolve a profile against this host: variables, "
                                              "limits, thread estimate, verdict."),
    "render": ("launcher.cli.render_cmd:COMMAND", "Write the Dockerfile, entrypoint, compose.yaml "
                                                  "and RunPod template into a folder."),
    "build": ("launcher.cli.build_cmd:COMMAND", "Build an image that carries the profile's caps "
                                                "in its entrypoint."),
    "run": ("launcher.cli.run_command:run", "Run a workload or a command under the profile's "
                                            "caps, in a container or natively."),
    "examples": ("launcher.cli.examples_cmd:COMMAND", "List the example jobs and the base image "
                                                      "recipe, or write them out."),
    "workloads": ("launcher.cli.workloads_cmd:COMMAND", "List the workloads `launcher run` "
                                                        "knows: built-in and user YAML ones."),
    "report": ("launcher.cli.report_cmd:COMMAND", "Print a run's summary: peaks against limits, "
                                                  "growth per cycle, diagnosis."),
    "calibrate": ("launcher.cli.calibrate_cmd:COMMAND", "Measure each framework's peak thread "
                                                        "count on this host."),
    "bench-memory": ("launcher.cli.bench_cmd:COMMAND", "Measure a job's real worker's memory at "
                                                       "several chunk sizes."),
    "profiles": (PROFILES, "List, show and validate hardware profiles."),
    "jobs": (JOBS, "Chunked jobs: a command run once per chunk of items, fanned out over GPUs, "
                   "nodes or Slurm, recorded in a ledger."),
}
GROUP_HELP = {
    "profiles": "List, show and validate hardware profiles.",
    "jobs": "Chunked jobs: a command run once per chunk of items under a profile's caps, "
            "fanned out over GPUs (or CPU slots) by a pull queue, recorded in a ledger that "
            "survives Ctrl-C, kill -9 and reboots.",
}
SETTINGS = {"help_option_names": ["-h", "--help"]}


class LazyGroup(click.Group):
    """A group whose commands are imported when used; `path` is its place for the plugins'
    sub-commands ("" at the top, "jobs." under jobs)."""

    def __init__(self, name: str, table: Table, path: str, **attrs: Any) -> None:
        super().__init__(name, context_settings=SETTINGS, no_args_is_help=True, **attrs)
        self.table, self.path = table, path

    def _plugins(self) -> dict[str, str]:
        """Sub-command name -> entry name, of the plugins' commands in this group."""
        from launcher.usecases.names import plugin_commands

        return {n[len(self.path):]: n for n in plugin_commands()
                if n.startswith(self.path) and "." not in n[len(self.path):]}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*self.table, *(n for n in self._plugins() if n not in self.table)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.table:
            target = self.table[cmd_name][0]
            if isinstance(target, dict):
                return LazyGroup(cmd_name, target, f"{self.path}{cmd_name}.",
                                 help=GROUP_HELP[cmd_name])
            module, _, attr = target.partition(":")
            import importlib

            return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]
        entry = self._plugins().get(cmd_name)
        if entry is None:
            return None
        from launcher.cli.plugin_cmd import plugin_command

        return plugin_command(cmd_name, entry)

    def resolve_command(self, ctx: click.Context,
                        args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        """An unknown command is a usage error that names the nearest, as click's options do."""
        name = args[0]
        if self.get_command(ctx, name) is None and not name.startswith("-"):
            import difflib

            near = difflib.get_close_matches(name, self.list_commands(ctx), n=1)
            hint = f" Did you mean {near[0]!r}?" if near else ""
            ctx.fail(f"No such command {name!r}.{hint}")
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The table's lines, with no command imported (a plugin's: its help's first line)."""
        rows = [(n, short) for n, (_, short) in self.table.items()]
        for name, entry in self._plugins().items():
            if name not in self.table:
                from launcher.usecases.names import plugin_command_help

                rows.append((name, plugin_command_help(entry)))
        limit = formatter.width - 6 - max(len(n) for n, _ in rows)
        with formatter.section("Commands"):
            formatter.write_dl([(n, _one_line(h, limit)) for n, h in rows])


def _one_line(text: str, limit: int) -> str:
    """`text` cut at a word to fit `limit` characters, "..." where it was cut (as click does)."""
    if len(text) <= limit:
        return text
    return text[:limit - 3].rsplit(" ", 1)[0].rstrip(",;:") + "..."


def _version(ctx: click.Context, _: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        click.echo(f"launcher {version('launcher')}")
    except PackageNotFoundError:
        from launcher import __version__

        click.echo(f"launcher {__version__}")
    ctx.exit()


def _verbose(ctx: click.Context, _: click.Parameter, value: bool) -> None:
    from launcher.cli.output import set_verbose

    set_verbose(value)


app = LazyGroup("launcher", COMMANDS, "", help=HELP, params=[
    click.Option(["--version"], is_flag=True, expose_value=False, is_eager=True,
                 callback=_version, help="Print launcher's version and exit."),
    click.Option(["--verbose", "-v"], is_flag=True, expose_value=False, callback=_verbose,
                 help="Also print the notes that change nothing (how the runtime was chosen, "
                      "where each thread value came from, defaults lowered to this host's "
                      "limits)."),
])


def main() -> None:
    app.main(prog_name="launcher")


if __name__ == "__main__":
    main()
