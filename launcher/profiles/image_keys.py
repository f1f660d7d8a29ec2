"""What may reach a Dockerfile from a profile's `image` section, checked when the profile
loads (so `profiles validate` says what a render or a build would refuse): an image reference,
Debian package names, pip requirements (PEP 508, one per item). Each check says why a value is
wrong, or None."""

from __future__ import annotations

import re
from typing import Any

# docker's reference grammar, simplified: [registry[:port]/]path[:tag][@digest]
IMAGE_REF = re.compile(
    r"^(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:[._-]{1,2}[a-z0-9]+)*"
    r"(?:/[a-z0-9]+(?:[._-]{1,2}[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@sha256:[a-f0-9]{64})?$"
)
_APT_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]+(?:=[A-Za-z0-9.+:~-]+)?$")


def image_ref_problem(value: Any) -> str | None:
    return None if IMAGE_REF.match(str(value)) else f"not a valid image reference (got {value!r})"


def apt_names_problem(names: Any) -> str | None:
    bad = [n for n in names if not _APT_NAME.match(str(n))]
    return f"not a Debian package name (got {bad[0]!r})" if bad else None


def pip_requirements_problem(reqs: Any) -> str | None:
    for r in reqs:
        why = _requirement_problem(str(r))
        if why:
            return f"{why} (got {r!r})"
    return None


def _requirement_problem(text: str) -> str | None:
    if "\n" in text or "\r" in text or text.lstrip().startswith("-"):
        return "one requirement per item, no pip options"
    try:  # launcher depends on packaging; an image's entrypoint may lack it (pip vendors it)
        from packaging.requirements import InvalidRequirement, Requirement
    except ImportError:
        return None
    try:
        Requirement(text)
    except InvalidRequirement as exc:
        first = str(exc).splitlines()[0].rstrip(".:")
        return f"not a requirement (PEP 508: a name, extras, a version, a marker): {first}"
    return None
