"""`launcher run`'s command line, in click alone: `launcher run ...` builds this command and
nothing else, without typer's import (~20 ms of every start, where a run should cost no more
than `docker compose run`). main.py's group adds it beside the typer-built commands."""

from __future__ import annotations

from pathlib import Path

import click

from launcher.cli.run_args import RunCommand
from launcher.usecases.names import frameworks, runtimes  # metadata only, nothing imported

HELP = """Run a workload or a command under the profile's caps, in a container or natively:
pids limit, ulimits, memory, shm, CPUs and GPUs from the profile; every thread variable
set before the interpreter starts. In a container the current folder is mounted at its
own path and is the working directory, and the workload runs as you. Output is
streamed; Ctrl-C stops and cleans up, and so does killing launcher; the exit status is
the workload's (75 after --stop-before-limit stopped it). Telemetry and a summary go to
runs/RUN-ID/, with growth across the cycles the workload's output marks.

Examples: launcher run stress-jax --phase 1 --quick;
launcher run --image IMG -- python3 train.py;
launcher run --profile rig-6600 --dry-run --json -- python3 train.py"""

FIT_HELP = ("When the estimated threads exceed the pids budget, shrink the pools to the largest "
            "size that fits with headroom (CPUs for JAX, thread counts for the others) instead "
            "of refusing.")
GPUS_HELP = "all | none | N | ID,ID... (default: the profile's gpu.count)."
PROFILE_HELP = "Profile name or path to a YAML file."
FRAMEWORK_HELP = "The framework whose threads to budget (default: the profile's)."
ENV_HELP = "NAME=VALUE; wins over the profile. Repeatable."
PATH = click.Path(path_type=Path)


@click.command("run", cls=RunCommand, help=HELP, context_settings={
    "allow_interspersed_args": False, "help_option_names": ["-h", "--help"],
    "show_default": True})
@click.argument("command", nargs=-1, metavar="[WORKLOAD [ARGS] | -- CMD [ARGS]]")
@click.option("--profile", "-p", default="auto", help=PROFILE_HELP)
@click.option("--framework", "-f", metavar="|".join(frameworks()),
              help=FRAMEWORK_HELP)
@click.option("--processes", "-n", type=click.IntRange(min=1),
              help="Processes sharing the budget (default: the profile's workers.processes).")
@click.option("--runtime", default="auto", help="auto (docker when a daemon answers and the "
              f"image exists, else native) | {' | '.join(runtimes())}")
@click.option("--image", help="Image to run (default: launcher/PROFILE:FRAMEWORK).")
@click.option("--gpus", help=GPUS_HELP)
@click.option("--env", "-e", multiple=True, help=ENV_HELP)
@click.option("--volume", "-v", multiple=True, help="SRC:DST[:ro], as docker has it. "
                                                    "Repeatable.")
@click.option("--workdir", "-w", help="Working directory (default: the current folder, "
                                      "mounted at its own path).")
@click.option("--user", help="UID[:GID] in the container (default: yours, so files written "
                             "into mounted folders are yours; --user 0 for root).")
@click.option("--no-mount-cwd", is_flag=True, help="Do not mount the current folder into the "
                                                   "container.")
@click.option("--name", help="Run ID and container name.")
@click.option("--resume", help="Run again in the folder of RUN_ID (a workload resumes from "
                               "what it saved there).")
@click.option("--dry-run", is_flag=True, help="Print the configuration instead of starting "
              "it (works on any host: GPUs this host lacks are a warning).")
@click.option("--interval", type=click.FloatRange(min=0.05), default=1.0,
              help="Telemetry sampling period in seconds (at least 0.05).")
@click.option("--write-profile", type=PATH, help="After the run (any workload or command), "
              "write a profile extending --profile with what it measured: workers.memory (the "
              "memory peak + 25%), workers.threads (the threads peak) and the growth per cycle, "
              "with the limits it ran under; a stress run (stress-jax, pytorch-phase3) adds its "
              "recommended settings.")
@click.option("--fit", is_flag=True, help=FIT_HELP)
@click.option("--cycle", metavar="REGEX", help="What marks a cycle in the workload's output: a "
              "regular expression whose first group is the cycle's number; it replaces the "
              "profile's growth.cycle and the defaults (`fold N`, `cycle N`, `epoch N`, Keras' "
              "`Epoch N/M`, `step N`). Growth per cycle is projected to each limit while it "
              "runs.")
@click.option("--stop-before-limit", is_flag=True, help="Stop the workload (SIGTERM, then "
              "SIGKILL after 10 s) at the start of the cycle that growth would take past a "
              "limit, so it can write its checkpoint; exit status 75 (as the profile's "
              "growth.stop).")
@click.option("--override", is_flag=True, help="Run it even where the plan refuses it (the "
              "threads or the memory would not fit): you know the workload better than the "
              "estimate. The start line, summary.json and the diagnosis say it was overridden, "
              "with the plan's reasons (as the profile's limits.override). A limit the kernel "
              "cannot keep is still refused under --require-limits.")
@click.option("--require-limits", is_flag=True, help="Refuse to start when a limit the "
              "profile asks for cannot be enforced here (a native run without a usable "
              "cgroup).")
@click.option("--verbose", is_flag=True, help="Also print the notes that change nothing (as "
              "`launcher -v run`; -v is --volume here).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--host-root", type=PATH, hidden=True, envvar="LAUNCHER_HOST_ROOT",
              help="Read host facts from this tree instead of / (tests, captured hosts).")
def run(command: tuple[str, ...], no_mount_cwd: bool, verbose: bool, env: tuple[str, ...],
        volume: tuple[str, ...], **given: object) -> None:
    from launcher.cli import run_cmd
    from launcher.cli.errors import run_guarded
    from launcher.cli.output import set_verbose

    if verbose:
        set_verbose(True)
    options = run_cmd.RunOptions(command=list(command), env=list(env), volumes=list(volume),
                                 mount_cwd=not no_mount_cwd, **given)  # type: ignore[arg-type]
    code = run_guarded(lambda: run_cmd.run(options))
    if code:
        raise click.exceptions.Exit(code)
