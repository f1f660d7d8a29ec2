"""Profiles written by launcher (a stress run's findings, bench-memory's measurements): YAML
that extends the profile they were measured under, each value with the comment that says
where it came from. Checked by loading a copy before the file is replaced, whole."""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from launcher.errors import LauncherError
from launcher.profiles.loader import Profile, load_profile, shipped_dir

MARK = "# Written by `launcher"  # the first line of every profile written here


def check_target(path: Path, base: Profile, flag: str) -> None:
    """Refuse, before any work, a target that is not a .yaml file launcher may overwrite: the
    profile measured under, or a file someone else wrote."""
    if path.suffix not in (".yaml", ".yml"):
        raise LauncherError(f"{flag}: the file must end in .yaml (got {str(path)!r})")
    if not path.resolve().parent.is_dir():
        raise LauncherError(f"{flag}: {path}: no such directory {str(path.parent)!r}")
    chain = {p.resolve() for p in base.files or [base.path]}
    if path.resolve() in chain:
        raise LauncherError(f"{flag}: {path} is the profile this run is measured under (or one "
                            f"it extends); write to a new file, which extends it")
    if path.is_dir():
        raise LauncherError(f"{flag}: {path} is a directory")
    if path.exists():
        try:
            first = path.read_text(errors="replace").split("\n", 1)[0]
        except OSError as exc:
            raise LauncherError(f"{flag}: cannot read {path}: {exc.strerror}") from None
        if not first.startswith(MARK):
            raise LauncherError(f"{flag}: {path} exists and was not written by launcher; "
                                f"remove it or pick another file")


def shown(path: Path) -> str:
    """The path as a --profile argument (a bare name would mean a shipped profile)."""
    text = str(path)
    return text if path.is_absolute() or text.startswith(".") else f"./{text}"


def extends_ref(base: Profile, path: Path) -> str:
    """A shipped profile by its name; any other by its path relative to the new file."""
    if base.path.resolve().parent == shipped_dir():
        return base.name
    return os.path.relpath(base.path.resolve(), path.resolve().parent)


def profile_text(path: Path, base: Profile, by: str, sections: dict[str, Any],
                 notes: list[str]) -> str:
    by = " ".join(by.split())  # one comment line, whatever the command held
    lines = [f"{MARK}{by[8:] if by.startswith('launcher') else by}` on "  # 3.8: no removeprefix
             f"{socket.gethostname()}, "
             f"{time.strftime('%Y-%m-%d %H:%M')}, under profile {base.name}.",
             *(f"# {' '.join(n.split())}" for n in notes),  # one line each, whatever they hold
             f"name: {json.dumps(path.stem)}",
             f"extends: {json.dumps(extends_ref(base, path))}"]
    for section, values in sections.items():
        if not isinstance(values, dict):  # a top-level value (framework: jax)
            lines.append(f"{section}: {json.dumps(values)}")
            continue
        lines.append(f"{section}:")
        lines += [f"  {k}: {json.dumps(v)}" for k, v in values.items()]
    return "\n".join(lines) + "\n"


def write_profile(path: Path, base: Profile, by: str, sections: dict[str, Any],
                  notes: list[str]) -> None:
    """Whole or not at all, and only if it loads: a copy is loaded first (in a folder of its
    own, so the file at `path` stays as it was until the new one replaces it)."""
    with tempfile.TemporaryDirectory(prefix="launcher-profile-") as d:
        trial = Path(d) / path.name
        trial.write_text(profile_text(trial, base, by, sections, notes))
        chain = load_profile(trial).files[1:]
    if path.resolve() in {f.resolve() for f in chain}:  # it would extend itself
        raise LauncherError(f"{path}: the new profile extends it; write to a new file")
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(profile_text(path, base, by, sections, notes))
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise LauncherError(f"cannot write {path}: {exc.strerror}") from None

