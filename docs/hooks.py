"""MkDocs hooks (mkdocs.yml `hooks:`). A `|` inside code in a table row is written `\\|` so that
the row keeps its cells on GitHub too; Python-Markdown keeps the backslash in the code, so it is
taken out here."""

from __future__ import annotations

import re
from typing import Any

_CODE = re.compile(r"<code>(.*?)</code>", re.S)


def on_page_content(html: str, **_: Any) -> str:
    return _CODE.sub(lambda m: "<code>" + m.group(1).replace("\\|", "|") + "</code>", html)
