"""--fit and the profile's limits.fit, shared by `plan` and `run`."""

from __future__ import annotations

import dataclasses

from launcher.caps.model import Reason, Why
from launcher.caps.resolve import Resolved


def with_reason(r: Resolved, reason: Reason) -> Resolved:
    """The same resolution with one more reason on its verdict (a new value; `r` unchanged)."""
    verdict = r.caps.verdict.adding(reason)
    return dataclasses.replace(r, caps=dataclasses.replace(r.caps, verdict=verdict))


def fit_or_advise(r: Resolved, *, apply: bool) -> tuple[Resolved, str | None]:
    """With --fit (`apply`: to the headroom), or the profile's `limits.fit` where the pre-flight
    refuses, the run with its pools shrunk to fit the pids budget, and a line saying so;
    otherwise a refusal that a fit would avoid names it. Returns a new resolution."""
    from launcher.caps.fit import apply as apply_fit
    from launcher.caps.fit import fit_to_budget, why_nothing_fits

    refused = r.caps.verdict.level == "refuse"
    by = "--fit" if apply else "limits.fit" if refused and r.profile.get("limits.fit") else None
    fit = fit_to_budget(r) if refused or by else None
    if fit is None:
        if by and refused:
            return with_reason(r, Reason(Why.NOTHING_FITS, why_nothing_fits(r, by=by))), None
        return r, None
    if by:
        return apply_fit(r, fit, by), f"{by}: {fit.describe()}"
    return with_reason(r, Reason(Why.FIT_ADVICE, f"--fit runs it with {fit.describe()}.")), None
