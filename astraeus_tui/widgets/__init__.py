"""The dashboard's widgets: one per module, each with its ``.tcss`` beside it."""

from __future__ import annotations

from pathlib import Path


def css_beside(module_file: str) -> str:
    """The ``.tcss`` file next to a widget's module, as its DEFAULT_CSS."""
    return Path(module_file).with_suffix(".tcss").read_text(encoding="utf-8")
