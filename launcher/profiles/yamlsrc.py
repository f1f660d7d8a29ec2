"""YAML loading that remembers the line of every key, so errors can name it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launcher.errors import ProfileError

KeyPath = tuple[str, ...]


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


def load_yaml(path: Path) -> Located:
    import yaml  # deferred: only paths that read profiles pay for it

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileError(f"{path}: no such profile file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: cannot read: {exc}") from None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise ProfileError(f"{path}:1: the profile is empty")
        lines: dict[KeyPath, int] = {}
        _walk(node, (), lines, path)
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        raise ProfileError(f"{path}:{line}: invalid YAML: {exc.problem or exc.context}") from None
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
