"""docs/scheduling.md lists every message a user may grep for: each still comes from runner/.

The doc's message tables sit between ``<!-- messages: begin -->`` and
``<!-- messages: end -->``; a row's first cell is the message in backticks, ``<…>`` for
a variable part. Its prefix (the text before the first variable part, or the first
fixed text when it opens with one) must occur in a string literal of runner/, so a
message reworded in the code without the doc, or the other way round, fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "scheduling.md"
BLOCK = re.compile(r"<!-- messages: begin -->\n(.*?)<!-- messages: end -->", re.S)
ROW = re.compile(r"^\| `([^`]+)` \|", re.M)
VARIABLE = re.compile(r"<[^<>]*>")


def documented() -> list[str]:
    """The first cells of the message tables; ``\\|`` is how a table cell holds a ``|``."""
    text = DOC.read_text()
    return [m.replace("\\|", "|") for block in BLOCK.findall(text) for m in ROW.findall(block)]


def prefix(message: str) -> str:
    return next(part for part in VARIABLE.split(message) if part.strip())


def literals() -> list[str]:
    """Every string literal of runner/, f-strings' fixed parts included."""
    out = []
    for path in sorted((ROOT / "runner").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.append(node.value)
    return out


def test_the_doc_lists_the_queues_messages() -> None:
    messages = documented()
    assert len(messages) > 100
    assert "Next to run (priority <n>): waits for running work to end" in messages


def test_every_documented_message_still_comes_from_the_code() -> None:
    code = literals()
    missing = [m for m in documented() if not any(prefix(m) in text for text in code)]
    assert missing == []


def test_a_message_the_code_does_not_have_is_caught() -> None:
    code = literals()
    assert not any(prefix("Next in line (priority <n>): soon") in text for text in code)
    assert (
        prefix("<user> is not a member of namespace <workspace>")
        == " is not a member of namespace "
    )
