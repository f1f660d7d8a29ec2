"""One family of user-facing errors; the CLI turns them into `error: ...` and exit 1."""

from __future__ import annotations


class LauncherError(Exception):
    """A mistake or condition the user can fix; printed as one line, never a traceback."""

    exit_status = 1


class Refused(LauncherError):
    """The plan refuses the run (the pids budget, the memory): exit 1, or the refusal's own
    status where a script asked for the verdict (`--detailed-exitcode`)."""


class CommandNotFound(LauncherError):
    """The command to run is neither a workload nor on PATH: exit 127, as a shell's."""

    exit_status = 127


class CommandNotExecutable(LauncherError):
    """The command to run is a file that cannot be executed (no x bit, a directory): exit 126,
    as a shell's."""

    exit_status = 126


class ProfileError(LauncherError):
    """A profile file is missing, unreadable or invalid."""


class HostError(LauncherError):
    """A host file (cgroup, /proc) is malformed."""


class EngineError(LauncherError):
    """The container engine is unreachable or refused a request."""
