"""`launcher profiles list | show | validate`: the profiles found, one merged with where each
value came from, files checked."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.errors import ProfileError
from launcher.profiles.loader import Profile, available, display_path, load_profile

__all__ = ["Checked", "Profile", "display_path", "kind_of", "list_profiles", "show",
           "validate"]


def list_profiles() -> list[dict[str, Any]]:
    """Each profile found (user folders first): name, path (shipped ones as `profiles/NAME.yaml`),
    file (where it really is: inside the installed package for a shipped one), chain,
    description, or its error."""
    rows = []
    for name, path in available().items():
        try:
            p = load_profile(path)
            rows.append({"name": name, "path": display_path(path), "file": str(path.resolve()),
                         "extends": p.chain[:-1],
                         "description": p.get("description", ""), "error": None})
        except ProfileError as exc:
            rows.append({"name": name, "path": display_path(path), "file": str(path.resolve()),
                         "extends": [],
                         "description": "", "error": str(exc)})
    return rows


def show(name: str) -> Profile:
    return load_profile(Path(name) if name.endswith((".yaml", ".yml")) else name)


def kind_of(key: str) -> str:
    """The schema's kind of a dotted key (`size`, ...), or ""."""
    from launcher.profiles.schema import SCHEMA

    section, _, leaf = key.partition(".")
    spec = SCHEMA.get(section)
    return spec.get(leaf).kind if isinstance(spec, dict) and spec.get(leaf) else ""


@dataclass(frozen=True)
class Checked:
    file: Path
    error: str | None  # None: valid


def validate(files: list[Path]) -> list[Checked]:
    out = []
    for f in files:
        try:  # a name as --profile takes it (gtx1650, ./mine), else a file
            load_profile(f if f.exists() or f.suffix or len(f.parts) > 1 else f.name)
            out.append(Checked(f, None))
        except ProfileError as exc:
            out.append(Checked(f, str(exc)))
    return out
