"""Find, load, validate and merge profiles (`extends`), keeping file and line for each value."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launcher.errors import ProfileError
from launcher.profiles.schema import AUTO, SCHEMA, UNLIMITED, Key
from launcher.profiles.yamlsrc import Located, load_yaml
from launcher.units import parse_size

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CPU_LIST = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")


def _ascending(text: str) -> bool:
    from launcher.cpulist import cpu_ids

    try:
        return bool(cpu_ids(text))
    except ValueError:
        return False


def shipped_dir() -> Path:
    """The profiles that ship with launcher (package data; `profiles/` of the source tree)."""
    from launcher.shipped import shipped

    return shipped("profiles")


def display_path(path: Path) -> str:
    """Shipped profiles as `profiles/NAME.yaml`; others as given."""
    resolved = path.resolve()
    if resolved.parent == shipped_dir():
        return f"profiles/{resolved.name}"
    try:
        return str(resolved.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def user_dirs() -> list[Path]:
    dirs = [Path(p) for p in os.environ.get("LAUNCHER_PROFILE_PATH", "").split(":") if p]
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    dirs.append(config / "launcher" / "profiles")
    return dirs


def search_dirs() -> list[Path]:
    return [*user_dirs(), shipped_dir()]


@dataclass
class Profile:
    """A validated, merged profile: `data` is nested dicts, `origin` where each leaf came from."""

    name: str
    path: Path
    data: dict[str, Any]
    origin: dict[str, str] = field(default_factory=dict)  # "limits.pids" -> "file:line"
    chain: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)  # this file and every file it extends
    # the files of the chain that ship with launcher, as `origin` names them (kept in caps.json,
    # so the supervisor in an image knows a shipped default from the user's own value)
    shipped: list[str] = field(default_factory=list)

    def get(self, dotted: str, default: Any = None) -> Any:
        node: Any = self.data
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    def where(self, dotted: str) -> str:
        return self.origin.get(dotted, str(self.path))

    def from_shipped(self, dotted: str) -> bool:
        """Whether the value of `dotted` comes from a profile shipped with launcher (a default
        such as base.yaml's nofile 1048576), not from the user's own file."""
        return self.where(dotted).rpartition(":")[0] in self.shipped


def available() -> dict[str, Path]:
    """Name -> path of every profile found; user folders shadow shipped ones."""
    found: dict[str, Path] = {}
    for d in reversed(search_dirs()):
        if d.is_dir():
            for p in sorted(d.glob("*.y*ml")):
                found[p.stem] = p
    return dict(sorted(found.items()))


def locate(ref: str, near: Path | None = None) -> Path:
    """A profile reference (name or path) to a file: a path as given; a name as NAME.yaml in
    the current folder (or beside `near`), then the user folders, then the shipped ones."""
    if "/" in ref or ref.endswith((".yaml", ".yml")):
        p = Path(ref)
        if near is not None and not p.is_absolute():
            p = near.parent / p
        if not p.is_file():
            raise ProfileError(f"{p}: no such profile file")
        return p
    # a name on the command line is first looked for in the current folder (./NAME.yaml, as a
    # user who just wrote it expects); one named by `extends` beside the file that names it
    dirs = [near.parent if near is not None else Path.cwd()] + search_dirs()
    for d in dirs:
        for suffix in (".yaml", ".yml"):
            p = d / f"{ref}{suffix}"
            if p.is_file():
                return p
    names = list(available())  # the profiles; the current folder's YAML may be anything
    import difflib

    hint = difflib.get_close_matches(
        ref, sorted({*names, *(p.stem for p in dirs[0].glob("*.y*ml"))}), n=1)
    extra = f"; did you mean {hint[0]!r}?" if hint else f"; known: {', '.join(names) or 'none'}"
    looked = ", ".join(str(d) for d in dirs)
    raise ProfileError(f"profile {ref!r} not found{extra} (looked in {looked})")


def load_profile(ref: str | Path) -> Profile:
    path = ref if isinstance(ref, Path) else locate(ref)
    return _load(path, [])


def _load(path: Path, stack: list[Path]) -> Profile:
    resolved = path.resolve()
    if resolved in stack:
        cycle = " -> ".join(p.stem for p in [*stack, resolved])
        doc = load_yaml(stack[-1])
        raise ProfileError(f"{display_path(stack[-1])}:{doc.line(('extends',))}: extends: "
                           f"cycle {cycle}")
    doc = load_yaml(path)
    errors: list[str] = []  # every mistake of this file, one per line
    try:
        data, origin = validate(doc)
    except ProfileError as exc:
        errors += str(exc).splitlines()
        raw = doc.data if isinstance(doc.data, dict) else {}
        data, origin = {k: raw[k] for k in ("name", "extends") if isinstance(raw.get(k), str)}, {}
    name = data.setdefault("name", path.stem)
    if name != path.stem:
        errors.append(f"{path}:{doc.line(('name',))}: name: must equal the file name "
                      f"{path.stem!r} (got {name!r})")
    parent_ref = data.pop("extends", None)
    parent_path = None
    if parent_ref is not None:
        try:
            parent_path = locate(parent_ref, near=path)
        except ProfileError as exc:
            errors.append(f"{path}:{doc.line(('extends',))}: extends: {exc}")
    if errors:
        raise ProfileError("\n".join(errors))
    mine = [display_path(path)] if resolved.parent == shipped_dir() else []
    if parent_path is None:
        return Profile(name, path, data, origin, [name], [path], mine)
    parent = _load(parent_path, [*stack, resolved])
    merged = _merge(parent.data, data)
    merged["name"] = name
    return Profile(name, path, merged, {**parent.origin, **origin}, [*parent.chain, name],
                   [*parent.files, path], [*parent.shipped, *mine])


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def validate(doc: Located) -> tuple[dict[str, Any], dict[str, str]]:
    """Check every key and value against SCHEMA; return normalised data and origins."""
    if not isinstance(doc.data, dict):
        raise ProfileError(f"{doc.path}:1: expected a mapping of profile keys")
    origin: dict[str, str] = {}
    errors: list[str] = []
    out = _validate_map(doc, (), data=doc.data, spec=SCHEMA, origin=origin, errors=errors)
    if errors:  # every mistake of the file, one per line
        raise ProfileError("\n".join(errors))
    return out, origin


def _validate_map(
    doc: Located, prefix: tuple[str, ...], *, data: dict, spec: dict, origin: dict[str, str],
    errors: list[str],
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        try:
            _validate_key(doc, prefix, key=key, value=value, spec=spec, origin=origin, out=out,
                          errors=errors)
        except ProfileError as exc:
            errors.append(str(exc))
    return out


def _validate_key(doc: Located, prefix: tuple[str, ...], *, key: Any, value: Any, spec: dict,
                  origin: dict[str, str], out: dict[str, Any], errors: list[str]) -> None:
    path = (*prefix, str(key))
    dotted = ".".join(path)
    where = f"{display_path(doc.path)}:{doc.line(path)}"
    if key not in spec:
        import difflib

        hint = difflib.get_close_matches(str(key), list(spec), n=1)
        tip = f"; did you mean {'.'.join((*prefix, hint[0]))!r}?" if hint else ""
        known = "" if hint else f"; known keys: {', '.join(spec)}"
        raise ProfileError(f"{where}: {dotted}: unknown key{tip}{known}")
    sub = spec[key]
    if isinstance(sub, dict):
        if value is None:
            return
        if not isinstance(value, dict):
            raise ProfileError(f"{where}: {dotted}: expected a mapping (got {value!r})")
        out[key] = _validate_map(doc, path, data=value, spec=sub, origin=origin, errors=errors)
    else:
        out[key] = _check(sub, value, label=f"{where}: {dotted}", doc=doc, path=path,
                          origin=origin)
        why = sub.check(out[key]) if sub.check is not None and out[key] is not None else None
        if why:  # the entry's own check (a framework's key)
            raise ProfileError(f"{where}: {dotted}: {why}")
        origin[dotted] = where


def _check(
    key: Key, value: Any, *, label: str, doc: Located, path: tuple[str, ...],
    origin: dict[str, str],
) -> Any:
    def bad(why: str) -> ProfileError:
        return ProfileError(f"{label}: {why} (got {value!r})")

    if key.auto and value == AUTO:
        return AUTO
    if key.unlimited and value in (UNLIMITED, -1):
        return UNLIMITED
    allowed = " or `auto`" if key.auto else ""
    allowed += " or `unlimited`" if key.unlimited else ""
    kind = key.kind
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad(f"must be a whole number{allowed}")
        _range(key, value, bad)
        return value
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad(f"must be a number{allowed}")
        _range(key, value, bad)
        return float(value)
    if kind == "size":
        try:
            return parse_size(value)
        except ValueError as exc:
            raise bad(f"{exc}{allowed}") from None
    if kind == "bool":
        if not isinstance(value, bool):
            raise bad("must be true or false")
        return value
    if kind == "choice":
        if not key.accepts(value):
            raise bad(f"must be one of {', '.join(key.allowed())}")
        return value
    if kind == "str":
        if not isinstance(value, (str, int, float)) or isinstance(value, bool) or value == "":
            raise bad("must be a non-empty string")
        return str(value)
    if kind == "cpulist":
        text = str(value).replace(" ", "")
        if isinstance(value, bool) or not _CPU_LIST.match(text) or not _ascending(text):
            raise bad("must be a CPU list such as 0-3 or 0,2")
        return text
    if kind == "strlist":
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise bad("must be a list of non-empty strings")
        return list(value)
    if kind == "env":
        if not isinstance(value, dict):
            raise bad("must be a mapping of NAME: value")
        env: dict[str, str] = {}
        for name, v in value.items():
            line = doc.line((*path, str(name))) if doc else 0
            where = f"{display_path(doc.path)}:{line}: env.{name}"
            if not isinstance(name, str) or not _ENV_NAME.match(name):
                raise ProfileError(f"{where}: not a valid variable name (got {name!r})")
            if v is None or isinstance(v, (dict, list)):
                raise ProfileError(f"{where}: must be a string, number or boolean (got {v!r})")
            env[name] = ("true" if v else "false") if isinstance(v, bool) else str(v)
            origin[f"env.{name}"] = f"{display_path(doc.path)}:{line}"
        return env
    raise AssertionError(f"unknown schema kind {kind}")


def _range(key: Key, value: float, bad: Any) -> None:
    if value < key.minimum:
        raise bad(f"must be at least {key.minimum:g}")
    if key.maximum is not None and value > key.maximum:
        raise bad(f"must be at most {key.maximum:g}")
