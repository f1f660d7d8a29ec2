"""YAML for other programs to read (compose-go, kubectl): PyYAML writes YAML 1.1, and a YAML
1.2 reader takes some plain strings for numbers, bools or null; those are quoted here."""

from __future__ import annotations

import re
from typing import Any

# What YAML 1.2's core schema (compose-go's parser) reads as a number, a bool or null, while
# PyYAML (YAML 1.1) would write it plain: `0E0`, `1e5`, `0o17`, `.inf`, `True`, `~`.
NOT_A_STRING_IN_1_2 = re.compile(
    r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)"
    r"|0o[0-7]+|0x[0-9a-fA-F]+|true|True|TRUE|false|False|FALSE|null|Null|NULL|~|")


def yaml_dumper() -> Any:
    """PyYAML's safe dumper, quoting every string a YAML 1.2 reader would take for another
    type: a value from a profile stays the string it was."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: Any, value: str) -> Any:
        quoted = NOT_A_STRING_IN_1_2.fullmatch(value) is not None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value,
                                       style='"' if quoted else None)

    Dumper.add_representer(str, text)
    return Dumper
