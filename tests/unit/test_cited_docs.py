"""The code cites only the project's own docs: every ``docs/….md`` it names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CITED = re.compile(r"docs/[\w-]+\.md")


def cited() -> set[str]:
    found: set[str] = set()
    for package in ("runner", "astraeus_tui"):
        for path in (ROOT / package).rglob("*.py"):
            found.update(CITED.findall(path.read_text()))
    return found


def test_every_doc_the_code_cites_exists() -> None:
    names = cited()
    assert {"docs/api.md", "docs/scheduling.md", "docs/architecture.md"} <= names
    assert sorted(n for n in names if not (ROOT / n).is_file()) == []


def test_the_code_cites_no_design_file_outside_the_project() -> None:
    for package in ("runner", "astraeus_tui"):
        for path in (ROOT / package).rglob("*.py"):
            assert "DESIGN.md" not in path.read_text(), path
