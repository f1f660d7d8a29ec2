"""Why a limit cannot be enforced here, and the fix, kept apart: an advisory limit's words are
"WHY; FIX" as people read them (in --json too, where it is a string), and code that says a
shared fix once or swaps the fix for a container's reads `why` and `fix` instead. A leaf:
cgroups/, the engines and the supervisor make them."""

from __future__ import annotations


class Advisory(str):
    """A str, "WHY; FIX" (or WHY where there is no fix), carrying its two parts."""

    why: str
    fix: str

    def __new__(cls, why: str, fix: str = "") -> Advisory:
        made = super().__new__(cls, f"{why}; {fix}" if fix else why)
        made.why, made.fix = why, fix
        return made

    def __getnewargs__(self) -> tuple[str, str]:  # type: ignore[override]
        return self.why, self.fix


def parts(advisory: str) -> tuple[str, str]:
    """(why, fix) of an advisory's words: plain words have no fix."""
    if isinstance(advisory, Advisory):
        return advisory.why, advisory.fix
    return advisory, ""


def swap_fix(advisory: str, old: str, new: str) -> str:
    """`advisory` with fix `new` where its fix is `old` (any other stays as it is)."""
    why, fix = parts(advisory)
    return Advisory(why, new) if fix == old else advisory
