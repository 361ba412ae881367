"""A run's output on a terminal: control sequences escaped, colour kept, split or not."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from astraeus_tui.terminal_out import TerminalText

HOSTILE = b"\x1b]0;pwned\x07\x1b[2J\x1b]52;c;aGk=\x07\x1b[31mred\x1b[0m\r50%\tok\n"
SHOWN = "\\x1b]0;pwned\\x07\\x1b[2J\\x1b]52;c;aGk=\\x07\x1b[31mred\x1b[0m\r50%\tok\n"


def whole(*chunks: bytes) -> str:
    out = TerminalText()
    return "".join(out.feed(c) for c in chunks) + out.feed(b"", final=True)


def test_title_clear_and_clipboard_are_escaped_colour_and_whitespace_kept() -> None:
    assert whole(HOSTILE) == SHOWN


@pytest.mark.parametrize(
    ("data", "shown"),
    [(b"a\x9bb", "a\ufffdb"), ("a\u009b2J".encode(), "a\\x9b2J"), (b"\x7f", "\\x7f"),
     ("x\u202ey".encode(), "x\\u202ey"), (b"\x1b[1;38;5;208mo", "\x1b[1;38;5;208mo"),
     (b"\x1b[12", "\\x1b[12"), (b"\x1b", "\\x1b"), (b"\x1b[?25l", "\\x1b[?25l"),
     ("caf\u00e9 \u2713".encode(), "caf\u00e9 \u2713")],
)  # fmt: skip
def test_each_kind(data: bytes, shown: str) -> None:
    assert whole(data) == shown


@given(st.data())
def test_split_anywhere_it_reads_the_same(data: st.DataObject) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(HOSTILE)), max_size=6)))
    pieces = [HOSTILE[a:b] for a, b in zip([0, *cuts], [*cuts, len(HOSTILE)], strict=True)]
    assert whole(*pieces) == SHOWN


def test_an_endless_escape_is_not_held_forever() -> None:
    out = TerminalText()
    shown = out.feed(b"\x1b[" + b"1;" * 100)
    assert shown.startswith("\\x1b[1;1;")  # written, not held for a colour that never comes
