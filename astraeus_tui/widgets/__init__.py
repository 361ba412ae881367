"""The dashboard's widgets: one per module, each with its ``.tcss`` beside it."""

from __future__ import annotations

from pathlib import Path

from textual.message import Message


def css_beside(module_file: str) -> str:
    """The ``.tcss`` file next to a widget's module, as its DEFAULT_CSS."""
    return Path(module_file).with_suffix(".tcss").read_text(encoding="utf-8")


class Latest(Message):
    """A message only the newest of which matters: one not yet handled gives way to the
    next of its kind (Toolong's ``can_replace``)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, type(self))
