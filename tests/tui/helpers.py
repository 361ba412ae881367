"""Waiting on the dashboard: conditions, never sleeps that stand in for asserts."""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from typing import Any, TypeVar

from rich.console import Console
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widget import Widget

from astraeus_tui.screens.main import MainScreen

S = TypeVar("S", bound=Screen[Any])
WORKSPACES = """
[workspaces.vision]
members = ["*"]
max_priority = 10
quota = { gpus = 8 }

[workspaces.nlp]
members = ["*"]
"""


async def until(pilot: Pilot[Any], what: Callable[[], Any], timeout: float = 15,
                message: str = "") -> Any:  # fmt: skip
    """Let the app run until ``what()`` is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {message or what}")
        await pilot.pause(0.02)


def plain(widget: Widget) -> str:
    """What a widget shows, as text."""
    console = Console(width=widget.size.width or 120, record=True, file=io.StringIO())
    console.print(widget.render())
    return console.export_text()


async def main_screen(pilot: Pilot[Any]) -> MainScreen:
    """The main screen once the queue, the GPUs and the machine have been heard from."""
    await until(pilot, lambda: isinstance(pilot.app.screen, MainScreen), message="main screen")
    screen = pilot.app.screen
    assert isinstance(screen, MainScreen)
    await until(pilot, lambda: screen.settled, message="the first data")
    return screen


async def screen_of(pilot: Pilot[Any], kind: type[S]) -> S:
    screen = await until(pilot, lambda: isinstance(pilot.app.screen, kind) and pilot.app.screen,
                         message=kind.__name__)  # fmt: skip
    assert isinstance(screen, kind)
    return screen
