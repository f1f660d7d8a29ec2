"""What `launcher run` is asked (the command line's values) and what it answers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from launcher.flags import ENV, FIT, FRAMEWORK, GPUS, HOST_ROOT, PROCESSES, PROFILE, Flag, flag
from launcher.runtime.spec import RunSpec

OnOutput = Callable[[str, bytes], None]  # stream ("stdout"/"stderr"), bytes; may raise
# BrokenPipeError when the reader is gone


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    """`launcher run`'s flags, declared here once (cli/run_command.py builds the command)."""

    command: tuple[str, ...] = flag(Flag((), metavar="[WORKLOAD [ARGS] | -- CMD [ARGS]]",
                                         rest=True), ())  # a workload and its arguments
    profile: str = flag(PROFILE, "auto")
    framework: str | None = flag(replace(FRAMEWORK, help=(
        "The framework whose threads to budget (default: a built-in workload's, else the one "
        "its Python script imports, else the profile's).")))
    processes: int | None = flag(PROCESSES)
    runtime: str = flag(Flag(("--runtime",), "auto (docker when a daemon answers and the image "
                             "exists, else native) | ${runtimes}"), "auto")
    image: str | None = flag(Flag(("--image",), "Image to run (default: "
                                                "launcher/PROFILE:FRAMEWORK)."))
    gpus: str | None = flag(GPUS)
    env: dict[str, str] = flag(ENV, {})
    volumes: tuple[str, ...] = flag(Flag(("--volume", "-v"), "SRC:DST[:ro], as docker has it. "
                                         "Repeatable.", repeat=True), ())
    workdir: str | None = flag(Flag(("--workdir", "-w"), "Working directory (default: the "
                                    "current folder, mounted at its own path)."))
    user: str | None = flag(Flag(("--user",), "UID[:GID] in the container (default: yours, so "
                                 "files written into mounted folders are yours; --user 0 for "
                                 "root)."))
    mount_cwd: bool = flag(Flag(("--mount-cwd",), "Mount the current folder into the container "
                                "(--no-mount-cwd: do not).", kind="bool",
                                secondary=("--no-mount-cwd",)), True)
    interactive: bool = flag(Flag(("--interactive", "-i"), "Keep the container's stdin open "
                                  "and give it launcher's, as `docker run -i` (natively the "
                                  "workload always has launcher's stdin).", kind="bool"), False)
    tty: bool = flag(Flag(("--tty", "-t"), "Give the container a terminal, as `docker run -t`: "
                          "with -i and a terminal here, a shell or a REPL runs as at a "
                          "terminal (Ctrl-C is one SIGINT to its foreground job). Natively the "
                          "workload always has launcher's terminal.", kind="bool"), False)
    name: str | None = flag(Flag(("--name",), "Run ID and container name."))
    resume: str | None = flag(Flag(("--resume",), "Run again in the folder of RUN_ID (a "
                                   "workload resumes from what it saved there)."))
    dry_run: bool = flag(Flag(("--dry-run",), "Print the configuration instead of starting it "
                              "(works on any host: GPUs this host lacks are a warning).",
                              kind="bool"), False)
    interval: float = flag(Flag(("--interval",), "Telemetry sampling period in seconds (at "
                                "least 0.05).", kind="float", minimum=0.05), 1.0)
    write_profile: Path | None = flag(Flag(
        ("--write-profile",), "After the run (any workload or command), write a profile "
        "extending --profile with what it measured: workers.memory (the memory peak + 25%), "
        "workers.threads (the threads peak) and the growth per cycle, with the limits it ran "
        "under; a stress run (stress-jax, pytorch-phase3) adds its recommended settings.",
        kind="path"))
    fit: bool = flag(FIT, False)
    cycle: str | None = flag(Flag(
        ("--cycle",), "What marks a cycle in the workload's output: a regular expression whose "
        "first group is the cycle's number; it replaces the profile's growth.cycle and the "
        "defaults (`fold N`, `cycle N`, `epoch N`, Keras' `Epoch N/M`, `step N`). Growth per "
        "cycle is projected to each limit while it runs.", metavar="REGEX"))
    stop_before_limit: bool = flag(Flag(
        ("--stop-before-limit",), "Stop the workload (SIGTERM, then SIGKILL after 10 s) at the "
        "start of the cycle that growth would take past a limit, so it can write its "
        "checkpoint; exit status 75 (as the profile's growth.stop).", kind="bool"), False)
    override: bool = flag(Flag(
        ("--override",), "Run it even where the plan refuses it (the threads or the memory "
        "would not fit): you know the workload better than the estimate. The start line, "
        "summary.json and the diagnosis say it was overridden, with the plan's reasons (as the "
        "profile's limits.override). A limit the kernel cannot keep is still refused under "
        "--require-limits.", kind="bool"), False)
    require_limits: bool = flag(Flag(
        ("--require-limits",), "Refuse to start when a limit the profile asks for cannot be "
        "enforced here (a native run without a usable cgroup).", kind="bool"), False)
    host_root: Path | None = flag(HOST_ROOT)


@dataclass(frozen=True, kw_only=True)
class DryRun:
    """What a real run would start, and what it could not enforce here."""

    runtime: str
    spec: RunSpec
    request: Any  # the engine's own request (docker's container config, a process plan)
    framework: str  # whose threads it budgets for
    framework_from: str  # where that came from: "--framework", "train.py:3 (import torch)"
    threads: str  # the estimate in words, for the whole run
    estimate: dict[str, Any]
    verdict: dict[str, Any]
    advisory: dict[str, str]  # cap -> why a real run could not enforce it here
    refused_by: str | None  # who makes a real run refuse for it (None: a warning)


@dataclass(frozen=True, kw_only=True)
class RunResult:
    status: int  # the workload's exit status (or its parser's, for its --help)
    signal: int | None = None  # the signal it died of: launcher ends by it too
    help: str | None = None  # a user workload's --help: printed, nothing run
    dry_run: DryRun | None = None
    run_dir: Path | None = None
