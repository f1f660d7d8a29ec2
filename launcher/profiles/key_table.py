"""The table of the profile keys the plugins declare (each vendor's, framework's and workload's
`profile_keys`), as docs/profiles.md holds it between its markers: written by
scripts/profile-keys-doc.py, held in sync by tests/test_profiles.py."""

from __future__ import annotations

from launcher.keys import Key

BEGIN = "<!-- plugin profile keys: written by scripts/profile-keys-doc.py -->"
END = "<!-- end of plugin profile keys -->"
_WORDS = {"int": "integer", "float": "number", "str": "string", "bool": "bool", "size": "size",
          "cpulist": "CPU list", "strlist": "list of strings", "env": "map NAME: value"}
_PIPE = "\\|"  # a | in a cell


def type_words(key: Key) -> str:
    """What a key takes, as the docs say it: `integer, auto`, `number (0.01-1)`, `a / b`."""
    words = " / ".join(key.allowed()) if key.kind == "choice" else _WORDS[key.kind]
    if key.maximum is not None:
        words += f" ({key.minimum:g}-{key.maximum:g})"
    return ", ".join([words, *(["auto"] if key.auto else []),
                      *(["unlimited"] if key.unlimited else [])])


def plugin_keys_table() -> str:
    """The markdown table of every installed plugin's profile keys, in registry order."""
    from launcher.profiles.schema import contributions

    rows = ["| key | type | declared by | meaning |", "|---|---|---|---|"]
    for whose, sections in contributions():
        for section, keys in sections.items():
            rows += [f"| `{section}.{name}` | {type_words(key)} | {whose} | "
                     f"{key.doc.replace('|', _PIPE)} |" for name, key in keys.items()]
    return "\n".join(rows) + "\n"


def with_table(page: str, table: str) -> str:
    """`page` (docs/profiles.md's markdown) with `table` between its markers."""
    head, begin, rest = page.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"no {BEGIN!r} ... {END!r} markers")
    return f"{head}{BEGIN}\n{table}{END}{tail}"
