"""The main screen's footer fits the terminal: no key under the command palette's."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from textual.widgets import Footer

from tests.tui.helpers import app_for, settled

KEY = "FooterKey"  # Textual's key widget, by its type's name (it is not public)


async def _keys(width: int, height: int) -> tuple[list[Any], Any, int]:
    app = app_for("head")
    async with app.run_test(size=(width, height)) as pilot:
        await settled(pilot)
        await pilot.pause()
        footer = app.screen.query_one(Footer)
        keys = list(footer.query(KEY))
        palette = next(k for k in keys if k.has_class("-command-palette"))
        shown = [k for k in keys if k is not palette]
        for key in shown:
            assert key.region.right <= palette.region.x, (key.description, key.region)
        assert palette.region.right <= width
        await pilot.resize_terminal(120, 36)
        await pilot.pause()
        await pilot.pause()
        wide = len(app.screen.query_one(Footer).query(KEY))
        return shown, palette, wide


@pytest.mark.parametrize("size", [(80, 24), (60, 24)])
def test_at_narrow_widths_the_keys_fit_beside_the_palette(size: tuple[int, int]) -> None:
    shown, palette, wide = asyncio.run(_keys(*size))
    actions = [k.action for k in shown]
    assert "new_run" in actions and "panel" in actions and "quit" in actions
    assert "sort" not in actions
    assert wide == 13  # at 120 columns every key again, and the palette's
    assert palette.key_display == "^p"


def test_at_120_columns_every_key_is_shown() -> None:
    shown, _, _ = asyncio.run(_keys(120, 36))
    every = ["New", "Prio", "Del", "Logs", "Hold", "Head", "Find", "Sort", "WS", "State", "View"]
    assert [k.description for k in shown] == [*every, "Quit"]
