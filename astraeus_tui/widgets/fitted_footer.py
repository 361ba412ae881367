"""The main screen's footer, its keys cut to the terminal's width.

Textual's footer lays every shown key out in a row and docks the command palette's
key on the right: on a narrow terminal (80 columns) the last keys went under it. This
footer shows the keys that fit: past the width it leaves out the ones people need
least at a glance (:data:`LEAST_NEEDED`, in that order). A key left out still works,
and the command palette (``ctrl+p``) lists it.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.events import Resize
from textual.widget import Widget
from textual.widgets import Footer

LEAST_NEEDED = ("sort", "workspace", "state", "head", "hold")  # actions, first left out first
PALETTE = "-command-palette"


def key_width(key: Widget) -> int:
    """Columns a compact key takes: ``key description`` and the space after it; 0 for a
    widget of the footer's that is not a key. (Textual's key widget is not public: a key
    is known by its ``key_display`` and ``action``.)"""
    display, description = getattr(key, "key_display", None), getattr(key, "description", "")
    if not isinstance(display, str):
        return 0
    return len(display) + (1 + len(description) if description else 0) + 1


def fitted(keys: list[Widget], width: int) -> list[Widget]:
    """``keys`` (the footer's widgets) without the least needed ones, until they fit."""
    shown = list(keys)
    for action in LEAST_NEEDED:
        if sum(key_width(k) for k in shown) <= width:
            break
        shown = [k for k in shown if not (getattr(k, "action", None) == action
                                          and not k.has_class(PALETTE))]  # fmt: skip
    return shown


class FittedFooter(Footer):
    """A compact :class:`Footer` whose keys fit the screen's width (module doc)."""

    def __init__(self) -> None:
        super().__init__(compact=True)
        self._width = 0

    def compose(self) -> ComposeResult:
        self._width = self.app.size.width
        yield from fitted(list(super().compose()), self._width)

    def on_resize(self, event: Resize) -> None:
        if self.app.size.width != self._width:
            self.call_after_refresh(self.recompose)
