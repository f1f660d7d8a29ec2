"""`launcher run`'s command line: its flags are RunRequest's (launcher/usecases/run.py), plus
--verbose and --json; launcher's options given after a built-in workload's name are moved
before it (cli/run_args.py)."""

from __future__ import annotations

from launcher.cli.declare import JSON, command
from launcher.cli.run_args import RunCommand
from launcher.flags import Declared, Flag
from launcher.usecases.run import RunRequest

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

VERBOSE = Declared("verbose", Flag(("--verbose",), "Also print the notes that change nothing "
                                                   "(as `launcher -v run`; -v is --volume "
                                                   "here).", kind="bool"), False)


def _run(req: RunRequest, *, verbose: bool, as_json: bool) -> int:
    from launcher.cli import run_cmd
    from launcher.cli.output import set_verbose

    if verbose:
        set_verbose(True)
    return run_cmd.run(req, as_json=as_json)


run = command("run", RunRequest, _run, own=(VERBOSE, JSON), help=HELP, cls=RunCommand,
              settings={"allow_interspersed_args": False, "show_default": True})
