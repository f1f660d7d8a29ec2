"""The one call from a profile reference to caps: load the profile, read the host (or a
captured tree), resolve. Every command that resolves a profile goes through here."""

from __future__ import annotations

from pathlib import Path

from launcher.caps.resolve import Resolved, resolve
from launcher.probe import HostFacts, probe_host
from launcher.profiles import load_profile
from launcher.profiles.loader import Profile


def load_and_resolve(profile: str | Profile, *, host_root: Path | None = None,
                     facts: HostFacts | None = None, inherit_shell: bool = True,
                     framework: str | None = None, processes: int | None = None,
                     overrides: dict[str, str] | None = None, gpus: str | None = None,
                     for_this_host: bool = True, clamp: bool = False, extra_threads: int = 0,
                     gpus_per_process: int | None = None) -> Resolved:
    """`profile` (a name, a path, or one already loaded) resolved against `facts`, else the
    host read at `host_root` (default /); the shell's variables are the inherited environment
    when `inherit_shell` (the workload sees them: a native run, this host's plan)."""
    facts = facts or probe_host(host_root or "/")
    loaded = profile if isinstance(profile, Profile) else load_profile(profile)
    return resolve(loaded, facts, framework=framework, processes=processes,
                   overrides=overrides or {}, gpus=gpus,
                   inherited=facts.env if inherit_shell else {}, for_this_host=for_this_host,
                   clamp=clamp, extra_threads=extra_threads, gpus_per_process=gpus_per_process)
