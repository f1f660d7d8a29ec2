"""Where a job's chunks run, as a registry (entry-point group `launcher.backends`): `local`
(this machine's engine: native processes or containers) and `ray` (a Ray cluster). The
ledger, the pull queue and the OOM split stay with the driver either way; a backend gives the
slots and runs one chunk on one of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from launcher.errors import LauncherError
from launcher.flags import Flag
from launcher.jobs.job import Prepared
from launcher.jobs.runner import Executor, Slot
from launcher.registry import Registry


class Backend(Protocol):
    name: str
    on_this_host: bool  # chunks run on this machine (else on a cluster's nodes)

    def slots(self) -> list[Slot]: ...

    def executor(self) -> Executor: ...

    def concurrency_note(self) -> str: ...

    def close(self) -> None: ...

    # A capability a backend may have (a static method): what its scheduler says of a job's
    # chunks, for `jobs status` (Slurm: each chunk's job and state), with `lines` to show.
    # external_state(folder, job_name, launcher_running) -> dict




_registry: Registry[Any] = Registry("backend", group="launcher.backends",
                                    default="Backend")


def _known(name: str) -> Any:
    if name not in _registry:
        raise LauncherError(f"--backend must be one of {', '.join(_registry.names())} "
                            f"(got {name!r})")
    return _registry.get(name)


def on_this_host(name: str) -> bool:
    return bool(_known(name).on_this_host)


def flags_of(name: str) -> dict[str, Flag]:
    """The flags backend `name` declares (`flags`: its options' dest -> Flag)."""
    return dict(getattr(_known(name), "flags", {}))


def get_backend(name: str, p: Prepared, folder: Path, items: list[str] | None,
                options: dict[str, Any]) -> Backend:
    """Backend `name` for the job; `options` holds runtime, image and the backends' own
    flags that were given, each of which must be this backend's."""
    cls = _known(name)
    check_options(name, options)
    return cls(p, folder, items, options)  # type: ignore[no-any-return]


def check_options(name: str, given: dict[str, Any]) -> None:
    """Each backend flag given is backend `name`'s own."""
    mine = flags_of(name)
    for other in _registry.names():
        for dest, f in flags_of(other).items():
            if dest in given and dest not in mine:
                raise LauncherError(f"{f.opts[0]} is an option of --backend {other} (this job "
                                    f"runs on --backend {name})")


def external_state(name: str, folder: Path, job: str,
                   launcher_running: bool) -> dict[str, Any] | None:
    """What the backend's own scheduler says of the job (None where it has nothing to say:
    local and Ray keep no state of their own beyond the ledger)."""
    if name not in _registry:
        return None
    read = getattr(_registry.get(name), "external_state", None)
    return None if read is None else read(folder, job, launcher_running)  # type: ignore[no-any-return]
