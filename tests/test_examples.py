"""The example job carries its own requirements, and the docs (docs/jobs.md) say to install them."""

from __future__ import annotations

import ast
import re
import sys

from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "score-survivors"


def _third_party_imports(path) -> set[str]:  # type: ignore[no-untyped-def]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m not in ("launcher",
                                                                             "__future__")}


def test_the_example_lists_what_its_worker_imports_and_the_readme_installs_it():
    reqs = EXAMPLE / "requirements.txt"
    assert reqs.is_file()
    named = {re.split(r"[<>=!~\[; ]", line.strip())[0].lower()
             for line in reqs.read_text().splitlines() if line.strip() and
             not line.lstrip().startswith("#")}
    imported = set().union(*(_third_party_imports(p) for p in EXAMPLE.glob("*.py")))
    assert imported and imported <= named, (imported, named)
    readme = (ROOT / "docs" / "jobs.md").read_text()
    block = readme[readme.index("cd examples/score-survivors"):]
    assert block.splitlines()[1].startswith("pip install -r requirements.txt")
