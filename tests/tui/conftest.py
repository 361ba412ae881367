"""The dashboard's tests use the integration tests' real daemon (``served``), and no
animations.

``snap_compare`` here is the snapshot plugin's, saying on a mismatch which lines of the
screen differ (the plugin's HTML report is gone with a clean clone; the log stays).
"""

from __future__ import annotations

import difflib
import html
import pickle
import re
from collections.abc import Callable
from typing import Any

import pytest
import textual.constants
from pytest_textual_snapshot import node_to_report_path

from tests.integration.conftest import served  # noqa: F401 (the fixture, re-exported)

# no animations: a scroll drawn halfway on a loaded machine put a snapshot one line off;
# every app made from here on moves at once (App reads the level as it is made)
textual.constants.TEXTUAL_ANIMATIONS = "none"

_TEXT = re.compile(  # a run of characters: its x, its line, its text
    r'<text [^>]*?x="([\d.]+)"[^>]*clip-path="url\(#[\w-]*-line-(\d+)\)"[^>]*>(.*?)</text>', re.S
)
_CELL = 12.2  # the width of one character in the SVG (a font of 20, 0.61 of it)


def screen_lines(svg: str) -> list[str]:
    """The characters of a snapshot's screen, line by line (no colours or styles)."""
    lines: dict[int, str] = {}
    for x, number, run in _TEXT.findall(svg):
        line, column = lines.get(int(number), ""), round(float(x) / _CELL)
        lines[int(number)] = line.ljust(column) + html.unescape(run).replace("\xa0", " ")
    return [lines.get(n, "").rstrip() for n in range(max(lines, default=-1) + 1)]


@pytest.fixture
def snap_compare(snap_compare: Callable[..., bool], request: pytest.FixtureRequest) -> Any:
    def compare(*args: Any, **kwargs: Any) -> bool:
        if snap_compare(*args, **kwargs):
            return True
        data = pickle.loads(node_to_report_path(request.node).read_bytes())
        expected, actual = screen_lines(data[1]), screen_lines(data[2])
        diff = "\n".join(difflib.unified_diff(expected, actual, "expected", "actual", lineterm=""))
        raise AssertionError(
            "the screen differs from its snapshot:\n" + diff if diff
            else "the screen's characters are its snapshot's: colours or styles differ"
        )  # fmt: skip

    return compare
