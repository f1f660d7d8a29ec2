"""The pre-flight lines printed before a workload starts (by the supervisor or `launcher run`)."""

from __future__ import annotations

from collections.abc import Callable

from launcher.caps.plan import Caps


def report(caps: Caps, quiet: bool, say: Callable[[str], None]) -> None:
    t = caps.threads
    if not quiet:
        src = caps.env["OMP_NUM_THREADS"].source if "OMP_NUM_THREADS" in caps.env else ""
        say(f"profile {caps.profile}, framework {caps.framework}: OMP/MKL/OpenBLAS "
            f"{t['omp']}, TF intra/inter {t['intra_op']}/{t['inter_op']} ({src}); "
            f"~{caps.estimate['per_process']} threads per process, budget "
            f"{caps.budget['available']} ({caps.budget['binding']})")
    for name, s in caps.env.items():
        if s.replaced is not None:
            new = "removed it" if s.value is None else f"set {s.value}"
            say(f"{name}={s.replaced} was inherited; {new} ({s.source})")
    for reason in caps.verdict.reasons:
        level = "refused" if caps.verdict.level == "refuse" else "warning"
        say(f"{level}: {reason}")
