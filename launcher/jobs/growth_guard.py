"""A chunk's watch: its supervisor samples it into the chunk's folder (telemetry.jsonl,
summary.json beside exit.json, which `launcher report CHUNK_DIR` reads), reads its cycles from
its output, and where the profile asks (`growth.stop`) stops it at the start of the cycle that
growth would take past a limit, with exit status 75. The runner then tries it again in a fresh
process (a stopped chunk is an attempt, like a failed one), with the stop's words as its
diagnosis. The same for every backend: a local chunk, a Ray task, a Slurm job step."""

from __future__ import annotations

from pathlib import Path

from launcher import contract
from launcher.caps.resolve import Resolved
from launcher.telemetry.growth_watch import GrowthOptions
from launcher.telemetry.watch_settings import WatchSettings


def watch_env(r: Resolved, folder: Path) -> dict[str, str]:
    """The supervisor's variables for a chunk's watch and record."""
    return {contract.RECORD_DIR: str(folder.resolve()), **WatchSettings(
        growth=GrowthOptions.of(r.profile, cycle_by="growth.cycle").to_json(),
        framework=r.framework, profile=r.caps.profile,
        estimate=r.caps.estimate.to_json()).to_env()}
