"""What `launcher run` is asked (the command line's values) and what it answers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launcher.runtime.spec import RunSpec

OnOutput = Callable[[str, bytes], None]  # stream ("stdout"/"stderr"), bytes; may raise
# BrokenPipeError when the reader is gone


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    command: tuple[str, ...]  # a workload and its arguments, or a command
    profile: str = "auto"
    framework: str | None = None
    processes: int | None = None
    runtime: str = "auto"
    image: str | None = None
    gpus: str | None = None
    env: dict[str, str] = field(default_factory=dict)  # --env, parsed
    volumes: tuple[str, ...] = ()
    workdir: str | None = None
    user: str | None = None
    mount_cwd: bool = True
    name: str | None = None
    resume: str | None = None
    dry_run: bool = False
    interval: float = 1.0
    host_root: Path | None = None
    write_profile: Path | None = None
    fit: bool = False  # shrink the pools to fit the pids budget instead of refusing
    require_limits: bool = False  # refuse rather than run with a limit the kernel cannot keep
    override: bool = False  # run it even where the plan refuses it (an informed override)
    cycle: str | None = None  # what marks a cycle in the output (a regular expression)
    stop_before_limit: bool = False  # stop at the start of the cycle growth takes past a limit


@dataclass(frozen=True, kw_only=True)
class DryRun:
    """What a real run would start, and what it could not enforce here."""

    runtime: str
    spec: RunSpec
    request: Any  # the engine's own request (docker's container config, a process plan)
    threads: str  # the estimate in words, for the whole run
    estimate: dict[str, Any]
    verdict: dict[str, Any]
    advisory: dict[str, str]  # cap -> why a real run could not enforce it here
    refused_by: str | None  # who makes a real run refuse for it (None: a warning)


@dataclass(frozen=True, kw_only=True)
class RunResult:
    status: int  # the workload's exit status (or its parser's, for its --help)
    help: str | None = None  # a user workload's --help: printed, nothing run
    dry_run: DryRun | None = None
    run_dir: Path | None = None
