"""`launcher profiles list | show | validate`: the profiles found, one merged with where each
value came from, files checked."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.errors import LauncherError, ProfileError
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
    """Each file as a run and a render would take it: the load (every key, with its line),
    then what only the image's making checks (the framework's image for the GPU vendor)."""
    out = []
    for f in files:
        try:  # a name as --profile takes it (gtx1650, ./mine), else a file
            p = load_profile(f if f.exists() or f.suffix or len(f.parts) > 1 else f.name)
            _image_checks(p)
            out.append(Checked(f, None))
        except LauncherError as exc:
            out.append(Checked(f, str(exc)))
    return out


def _image_checks(p: Profile) -> None:
    """The image `render` and `build` would make of it, where the profile names its vendor."""
    from launcher.defaults import NONE
    from launcher.keys import AUTO
    from launcher.render.dockerfile import image_spec

    vendor = p.get("gpu.vendor", AUTO)
    if vendor == AUTO:
        return
    try:
        image_spec(p, p.get("framework", NONE), vendor)
    except LauncherError as exc:
        where = p.where("framework") if p.get("framework") else p.where("gpu.vendor")
        raise LauncherError(f"{where}: {exc}") from None
