"""The README stays short and the documentation site in docs/ builds: every page is in the nav,
the README opens with the two commands, and `mkdocs build --strict` fails on a broken link or
anchor."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import yaml

from tests.conftest import ROOT, need
from tests.docker_helpers import missing_module

DOCS = ROOT / "docs"


def _nav_pages(nav: Any) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [p for v in nav.values() for p in _nav_pages(v)]
    return [p for item in nav for p in _nav_pages(item)]


def _code_blocks(text: str) -> list[str]:
    return re.findall(r"^```[a-z]*\n(.*?)^```$", text, re.S | re.M)


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["docs_dir"] == "docs"
    nav = _nav_pages(config["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert len(nav) == len(set(nav)), nav
    assert sorted(nav) == pages


def test_the_readme_is_short_and_opens_with_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    first = _code_blocks(readme)[0]
    comments = [line for line in first.splitlines() if line.startswith("# ")]
    assert comments[0].startswith("# 1. ") and any(c.startswith("# 2. ") for c in comments)
    commands = [line for line in first.splitlines() if line and not line.startswith("#")]
    assert commands[0].startswith("python3 -m venv .venv && ")
    assert ".venv/bin/launcher doctor" in commands[0]
    assert commands[1:] == ["bash scripts/test.sh"]
    # Getting started repeats the README's two commands and its tour of the field systems
    started = (DOCS / "getting-started.md").read_text()
    assert _code_blocks(started)[0] == first
    tour = readme[readme.index("## The field reports' systems"):readme.index("## Documentation")]
    assert tour.strip() in started


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    need("mkdocs", missing_module("mkdocs"))
    site = tmp_path / "site"
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                             str(site), "--config-file", str(ROOT / "mkdocs.yml")],
                            capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (site / "index.html").is_file() and (site / "cgroup-v2" / "index.html").is_file()
