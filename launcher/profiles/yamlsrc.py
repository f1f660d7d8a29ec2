"""YAML loading that remembers the line of every key, so errors can name it.

A file once parsed is kept as JSON in the user's cache, keyed by its path, inode, size and
times: PyYAML's import alone costs ~20 ms of every command that reads a profile, and the
shipped profiles never change between runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Tuple

from launcher.errors import ProfileError

KeyPath = Tuple[str, ...]


@dataclass
class Located:
    """A parsed document plus the 1-based line of each key path."""

    path: Path
    data: Any
    lines: dict[KeyPath, int] = field(default_factory=dict)

    def line(self, key: KeyPath) -> int:
        while key and key not in self.lines:
            key = key[:-1]
        return self.lines.get(key, 1)


def load_yaml(path: Path, what: str = "profile") -> Located:
    """The YAML file at `path` with each key's line; a mistake names the file as `what` (a
    profile, a job spec)."""
    cache = _cache_file(path)
    cached = _read_cache(cache, path) if cache else None
    if cached is not None:
        return cached
    doc = _parse(path, what)
    if cache:
        _write_cache(cache, doc)
    return doc


def _cache_file(path: Path) -> Path | None:
    """The file's device and inode name it; its size and times say it is unchanged (a name
    with no hash: hashlib's import would cost what the cache saves)."""
    import os

    try:
        st = path.stat()
    except OSError:
        return None  # _parse says why
    key = "-".join(map(str, (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                             f"v{CACHE_FORMAT}")))
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(home, "launcher", "yaml", f"{key}.json")


CACHE_FORMAT = 1
CACHE_KEEP = 256


def _read_cache(cache: Path, path: Path) -> Located | None:
    import json

    try:
        saved = json.loads(cache.read_text())
        return Located(path, saved["data"], {tuple(k): line for k, line in saved["lines"]})
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_cache(cache: Path, doc: Located) -> None:
    """Kept only where JSON gives the same data back (YAML's dates and non-string keys do
    not survive it); a cache that cannot be written is no error."""
    import json
    import os

    try:
        text = json.dumps({"data": doc.data, "lines": [[list(k), v]
                                                      for k, v in doc.lines.items()]})
        if json.loads(text)["data"] != doc.data:
            return
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(cache)
        _prune(cache.parent)
    except (OSError, TypeError, ValueError):
        pass


def _prune(folder: Path) -> None:
    """The oldest half goes once there are more than CACHE_KEEP (edits leave old keys)."""
    entries = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime)
    if len(entries) > CACHE_KEEP:
        for old in entries[: len(entries) // 2]:
            old.unlink(missing_ok=True)


def _tab_hint(text: str, mark: Any) -> str:
    """YAML indents with spaces only; a tab at or before the error is the likeliest cause."""
    if mark is None:
        return ""
    lines = text.splitlines()
    for at in (mark.line, mark.line - 1):
        if 0 <= at < len(lines) and "\t" in lines[at]:
            column = lines[at].index("\t") + 1
            return (f" (a tab at line {at + 1}, column {column}: YAML indents with spaces "
                    f"only; replace it with spaces)")
    return ""


def _parse(path: Path, what: str) -> Located:
    import yaml  # deferred: only paths that read profiles pay for it

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileError(f"{path}: no such {what} file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: cannot read: {exc}") from None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise ProfileError(f"{path}:1: the {what} is empty")
        lines: dict[KeyPath, int] = {}
        _walk(node, (), lines, path)
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        problem = exc.problem or exc.context or ""
        raise ProfileError(f"{path}:{line}: invalid YAML: {problem}"
                           f"{_tab_hint(text, mark)}") from None
    except yaml.YAMLError as exc:
        raise ProfileError(f"{path}:1: invalid YAML: {exc}") from None
    finally:
        loader.dispose()
    return Located(path, data, lines)


def _walk(node: Any, prefix: KeyPath, lines: dict[KeyPath, int], path: Path) -> None:
    import yaml

    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            line = key_node.start_mark.line + 1
            if key in seen:
                dotted = ".".join((*prefix, key))
                raise ProfileError(f"{path}:{line}: {dotted}: duplicate key")
            seen.add(key)
            lines[(*prefix, key)] = line
            _walk(value_node, (*prefix, key), lines, path)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[(*prefix, str(i))] = item.start_mark.line + 1
            _walk(item, (*prefix, str(i)), lines, path)
