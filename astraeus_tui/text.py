"""What the faces print of the daemon's text: never a raw control character, never markup.

Names, reasons, events and arguments come from other people. A character that is not
printable (ESC, BEL, a newline in an argument, a bidi override) is shown as its escape
(``\\x1b``, ``\\n``, ``\\u202e``), so nothing acts on the terminal and a line stays
one line; and Rich or Textual never read ``[...]`` in it as markup. The CLI's lines,
its tables and the dashboard's labels all go through here. A run's output, which
``astra logs`` and ``astra attach`` write, is escaped on a terminal by
``astraeus_tui.terminal_out`` (colour kept) and byte-exact when piped.
"""

from __future__ import annotations

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing at start-up

if TYPE_CHECKING:
    from rich.text import Text


def shown(value: object) -> str:
    """``value`` as text with every unprintable character escaped."""
    text = "" if value is None else str(value)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def plain(value: object, style: str = "") -> Text:
    """A Rich Text of ``value``: escaped, and never parsed as markup (table cells, labels)."""
    from rich.text import Text

    return Text(shown(value), style=style)


def markup_safe(value: object) -> str:
    """``value`` escaped, ready to sit inside a markup string (``f"[b]{markup_safe(x)}[/]"``)."""
    from rich.markup import escape

    return escape(shown(value))
