"""The pre-flight lines printed before a workload starts (by the supervisor or `launcher run`):
the effective thread values and where each came from, inherited values replaced, the verdict."""

from __future__ import annotations

from collections.abc import Callable

from launcher.caps.model import Caps
from launcher.frameworks import get as get_framework
from launcher.frameworks import names as framework_names
from launcher.variables import POOL_LABELS, verdict_says


def pools() -> dict[str, str]:
    """The pools a reader checks first, variable -> short name: the shared ones, then every
    framework's own."""
    out = dict(POOL_LABELS)
    for name in framework_names():
        out.update(get_framework(name).pool_labels)
    return out


def thread_summary(caps: Caps) -> str:
    """`OMP 7 (--env), MKL/OpenBLAS/TF intra 2, TF inter 2 (auto: ...)`: the values in force,
    grouped by value and source, each group with its source once."""
    groups: dict[tuple[str, str], list[str]] = {}
    for name, short in pools().items():
        s = caps.env.get(name)
        if s is None or s.value is None:
            continue
        groups.setdefault((s.value, s.source), []).append(short)
    return "; ".join(f"{'/'.join(names)} {value} ({source})"
                     for (value, source), names in groups.items())


def brief_threads(caps: Caps) -> str:
    """`OMP 7 (--env (explicit override)), MKL/OpenBLAS/TF intra/TF inter 2`: the values in
    force, with a source only where it is not the profile's or launcher's own choice."""
    groups: dict[tuple[str, str], list[str]] = {}
    for name, short in pools().items():
        s = caps.env.get(name)
        if s is None or s.value is None:
            continue
        source = "" if s.chosen() else s.source
        groups.setdefault((s.value, source), []).append(short)
    return ", ".join(f"{'/'.join(names)} {value}" + (f" ({source})" if source else "")
                     for (value, source), names in groups.items())


def preflight(caps: Caps, runtime: str, limits: str) -> str:
    """The one line `launcher run` prints before the workload's output."""
    threads = brief_threads(caps)
    return (f"profile {caps.profile}, framework {caps.framework}: "
            + (f"threads {threads}, " if threads else "")
            + f"{caps.estimate.in_all()}; {runtime} run, {limits}")


def report(caps: Caps, quiet: bool, say: Callable[[str], None],
           overridden_by: str | None = None) -> None:
    if not quiet:
        budget = caps.budget
        say(f"profile {caps.profile}, framework {caps.framework}: {thread_summary(caps)}; "
            f"{caps.estimate.in_all()}, budget "
            f"{budget.available if budget.available is not None else 'unlimited'} "
            f"({budget.binding})")
    for name, s in caps.env.items():
        if s.replaced is not None and not verdict_says(name, s.value):
            new = "removed it" if s.value is None else f"set {s.value}"
            say(f"{name}={s.replaced} was inherited; {new} ({s.source})")
    for reason in caps.verdict.reasons:
        level = "refused" if caps.verdict.level == "refuse" else "warning"
        if overridden_by and level == "refused":
            level = f"warning: refused, run anyway ({overridden_by})"
        say(f"{level}: {reason}")
