"""Which GPUs a run or a service gets: `--gpus all|none|N|ID,...` against the host's devices."""

from __future__ import annotations

import copy
import dataclasses

from launcher.defaults import NONE
from launcher.errors import LauncherError
from launcher.probe.host import HostFacts
from launcher.profiles.loader import Profile
from launcher.vendors import get as get_vendor
from launcher.vendors import no_gpu
from launcher.vendors import resolve as resolve_vendor
from launcher.vendors.base import GpuSelection

GPUS_HELP = "all, none, a count such as 2, or device IDs such as 0,2"


def one_per_process(processes: int, gpus: int) -> bool:
    """The profile runs a process per GPU (rig-6600: 12 processes, 12 GPUs): each sees its own
    GPU (a service each in a render, a chunk each in a job), and is budgeted for that one."""
    return gpus > 1 and processes >= gpus


def profile_vendor(profile: Profile, facts: HostFacts) -> str:
    return resolve_vendor(profile.get("gpu.vendor", NONE),
                          list(dict.fromkeys(g.vendor for g in facts.gpus)))


def select_gpus(profile: Profile, facts: HostFacts, selection: str | None,
                for_this_host: bool = True) -> GpuSelection:
    """The GPUs to use. With `for_this_host` False (render, build: the target is another
    machine) the profile's count is taken as GPUs 0..N-1 without looking for them here. GPUs
    this host lacks are still selected (a dry run shows the profile's configuration); the
    selection's `shortfall` says what is missing, and only a real run refuses it."""
    vendor = profile_vendor(profile, facts)
    found = [g.index for g in facts.gpus if g.vendor == vendor]
    count = profile.get("gpu.count", "auto")
    if selection is not None:
        selection = selection.strip().lower()
    if selection == NONE or not get_vendor(vendor).has_gpus:
        if selection not in (None, NONE):
            asked = profile.get("gpu.vendor", NONE)
            why = (f"profile {profile.name} uses no GPU vendor (gpu.vendor: {asked})"
                   if asked != "auto" else
                   f"this host shows no GPU, and profile {profile.name} takes its vendor from "
                   f"the host (gpu.vendor: auto)")
            raise LauncherError(f"--gpus {selection}: {why}; only --gpus none applies")
        return GpuSelection(no_gpu(), ())
    if not for_this_host and isinstance(count, int):
        found = sorted(set(found) | set(range(count)))
    label = get_vendor(vendor).label
    if selection is None:
        selection = "all" if count == "auto" else str(count)
    if selection == "all":
        if found:
            return GpuSelection(vendor, tuple(found), all=True)
        ids = tuple(range(count)) if isinstance(count, int) else ()
        return GpuSelection(vendor, ids, all=True,
                            shortfall=_lacking(profile, label, "all", found))
    if selection.isdigit():
        n = int(selection)
        if n == 0:
            return GpuSelection(no_gpu(), ())
        if n > len(found):
            # the host's GPUs, then the lowest indices it lacks
            ids = tuple(found) + tuple(i for i in range(2 * n) if i not in found)[:n - len(found)]
            who = "" if selection == str(count) else f"--gpus {n}: "
            return GpuSelection(vendor, tuple(sorted(ids)), shortfall=who + _lacking(
                profile, label, n, found))
        return GpuSelection(vendor, tuple(found[:n]))
    try:
        ids = tuple(int(x) for x in selection.split(","))
        if any(i < 0 for i in ids):
            raise ValueError
    except ValueError:
        raise LauncherError(f"--gpus must be {GPUS_HELP} (got {selection!r})") from None
    if len(set(ids)) != len(ids):
        raise LauncherError(f"--gpus {selection}: a GPU is named twice")
    missing = [i for i in ids if i not in found]
    shortfall = None
    if missing:
        shortfall = (f"--gpus {selection}: this host has no {label} GPU "
                     f"{', '.join(map(str, missing))} (found: "
                     f"{', '.join(map(str, found)) or 'none'}); use --gpus none to run "
                     f"on the CPU")
    return GpuSelection(vendor, ids, shortfall=shortfall)


def _lacking(profile: Profile, label: str, want: object, found: list[int]) -> str:
    return (f"profile {profile.name} asks for {want} {label} GPU(s) and this host has "
            f"{len(found)}; use --gpus none to run on the CPU, or --gpus N for fewer")


def with_gpus(profile: Profile, choice: GpuSelection) -> Profile:
    """The profile with gpu.vendor and gpu.count set to the choice."""
    data = copy.deepcopy(profile.data)
    gpu = data.setdefault("gpu", {})
    gpu["vendor"] = choice.vendor
    gpu["count"] = len(choice.ids)
    return dataclasses.replace(profile, data=data)
