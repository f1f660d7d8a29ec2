"""What the commands share: a profile resolved against a host, and the default image tag."""

from __future__ import annotations

from pathlib import Path

from launcher.caps.resolve import Resolved, resolve
from launcher.cli.output import parse_env_pairs
from launcher.probe import probe_host
from launcher.profiles import load_profile


def resolve_profile(profile_ref: str, *, framework: str | None = None,
                    processes: int | None = None, env_pairs: list[str] | None = None,
                    gpus: str | None = None, host_root: Path | None = None,
                    inherit_shell: bool = True, for_this_host: bool = True,
                    clamp: bool = False, extra_threads: int = 0) -> Resolved:
    """Load `profile_ref`, read the host (or `host_root`) and resolve: the one path, with the
    shell's managed variables as the inherited environment when `inherit_shell`."""
    overrides = parse_env_pairs(env_pairs)
    facts = probe_host(host_root or "/")
    return resolve(load_profile(profile_ref), facts, framework=framework, processes=processes,
                   overrides=overrides, gpus=gpus,
                   inherited=facts.env if inherit_shell else {}, for_this_host=for_this_host,
                   clamp=clamp, extra_threads=extra_threads)


def fit_or_advise(r: Resolved, apply: bool) -> tuple[Resolved, str | None]:
    """With --fit (to the headroom), or the profile's `limits.fit` where the pre-flight
    refuses, the run with its pools shrunk to fit the pids budget, and a line saying so;
    otherwise a refusal that a fit would avoid names it."""
    from launcher.caps.fit import apply as apply_fit
    from launcher.caps.fit import fit_to_budget, why_nothing_fits

    refused = r.caps.verdict.level == "refuse"
    by = "--fit" if apply else "limits.fit" if refused and r.profile.get("limits.fit") else None
    fit = fit_to_budget(r) if refused or by else None
    if fit is None:
        if by and refused:
            r.caps.verdict.reasons.append(why_nothing_fits(r).replace("--fit", by, 1))
        return r, None
    if by:
        return apply_fit(r, fit, by), f"{by}: {fit.describe()}"
    r.caps.verdict.reasons.append(f"--fit runs it with {fit.describe()}.")
    return r, None
