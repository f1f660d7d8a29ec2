"""Rewrite the plugin profile keys' table of docs/profiles.md from the registries (the keys of
the vendors, frameworks and workloads installed: run it without third-party plugins)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from launcher.profiles.key_table import plugin_keys_table, with_table  # noqa: E402

if __name__ == "__main__":
    doc = ROOT / "docs" / "profiles.md"
    doc.write_text(with_table(doc.read_text(), plugin_keys_table()))
    print(f"wrote {doc.relative_to(ROOT)}")
