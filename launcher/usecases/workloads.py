"""`launcher workloads`: the catalog (built-in and user YAML workloads); and a workload's own
parser, for `launcher run` to tell its flags from launcher's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from launcher.errors import LauncherError
from launcher.workloads.catalog import Workload, catalog

if TYPE_CHECKING:
    import argparse

__all__ = ["Workload", "catalog", "parser_of"]


def parser_of(name: str) -> argparse.ArgumentParser | None:
    """The parser of the workload `name`; None for a command, or a broken user workload file
    (`run` reports it in one line)."""
    try:
        workload = catalog().get(name)
    except LauncherError:
        return None
    return workload.parser() if workload is not None else None
