"""Which GPUs a run or a service gets: `--gpus all|none|N|ID,...` against the host's devices."""

from __future__ import annotations

import copy
from dataclasses import dataclass

from launcher.errors import LauncherError
from launcher.probe.host import HostFacts
from launcher.profiles.loader import Profile


@dataclass(frozen=True)
class GpuChoice:
    vendor: str  # nvidia | amd | none
    ids: tuple[int, ...]
    all: bool = False


def select_gpus(profile: Profile, facts: HostFacts, selection: str | None,
                for_this_host: bool = True) -> GpuChoice:
    """The GPUs to use. With `for_this_host` False (render, build: the target is another
    machine) the profile's count is taken as GPUs 0..N-1 without looking for them here."""
    vendor = profile.get("gpu.vendor", "none")
    if vendor == "auto":
        vendor = facts.gpus[0].vendor if facts.gpus else "none"
    found = [g.index for g in facts.gpus if g.vendor == vendor]
    count = profile.get("gpu.count", "auto")
    if not for_this_host and isinstance(count, int):
        found = sorted(set(found) | set(range(count)))
    if selection == "none" or vendor == "none":
        if selection not in (None, "none"):
            raise LauncherError(f"--gpus {selection}: profile {profile.name} uses no GPU vendor "
                                f"(gpu.vendor: {vendor})")
        return GpuChoice("none", ())
    if selection is None:
        selection = "all" if count == "auto" else str(count)
    if selection == "all":
        ids = tuple(found)
        if not ids:
            raise _lacking(profile, vendor, "all", found)
        return GpuChoice(vendor, ids, all=True)
    if selection.isdigit():
        n = int(selection)
        if n == 0:
            return GpuChoice("none", ())
        if n > len(found):
            raise _lacking(profile, vendor, n, found)
        return GpuChoice(vendor, tuple(found[:n]))
    try:
        ids = tuple(int(x) for x in selection.split(","))
    except ValueError:
        raise LauncherError(f"--gpus must be all, none, a count or IDs such as 0,2 "
                            f"(got {selection!r})") from None
    missing = [i for i in ids if i not in found]
    if missing:
        raise LauncherError(f"--gpus {selection}: this host has no {vendor.upper()} GPU "
                            f"{', '.join(map(str, missing))} (found: "
                            f"{', '.join(map(str, found)) or 'none'}); use --gpus none to run "
                            f"on the CPU")
    return GpuChoice(vendor, ids)


def _lacking(profile: Profile, vendor: str, want: object, found: list[int]) -> LauncherError:
    return LauncherError(f"profile {profile.name} asks for {want} {vendor.upper()} GPU(s) and "
                         f"this host has {len(found)}; use --gpus none to run on the CPU, or "
                         f"--gpus N for fewer")


def with_gpus(profile: Profile, choice: GpuChoice) -> Profile:
    """The profile with gpu.vendor and gpu.count set to the choice."""
    data = copy.deepcopy(profile.data)
    gpu = data.setdefault("gpu", {})
    gpu["vendor"] = choice.vendor
    gpu["count"] = len(choice.ids)
    return Profile(profile.name, profile.path, data, profile.origin, profile.chain)
