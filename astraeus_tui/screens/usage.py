"""Usage: what each workspace's finished runs used in the last 7 days, as bars.

``GET /v1/usage?since=7d&by=workspace&daily=1`` when opened and every 10 s; ``r`` asks again
at once, ``escape`` goes back. The same numbers as ``astra usage``.
"""

from __future__ import annotations

import asyncio
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Footer, Static

from astraeus_tui.client import ApiError, DashboardApi
from astraeus_tui.widgets import SaysFaults
from astraeus_tui.widgets.usage_panel import UsagePanel

REFRESH_EVERY = 10.0
SINCE = "7d"


class UsageScreen(SaysFaults, Screen[None]):
    CSS_PATH = "usage.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "back", "Back", tooltip="Back to the queue"),
        Binding("r", "refresh", "Refresh", tooltip="Ask the daemon again now"),
    ]

    def __init__(self, client: DashboardApi) -> None:
        super().__init__()
        self.client = client

    def compose(self) -> ComposeResult:
        yield Static(Text("Usage of finished runs, per workspace", style="bold"), id="title")
        yield UsagePanel(id="usage")
        note = "Also: astra usage --by user, astra history (your workspaces' finished runs)."
        yield Static(Text(note, style="dim"), id="note")
        yield Footer()

    def on_mount(self) -> None:
        self.load()

    @work(exclusive=True, group="usage", exit_on_error=False)
    async def load(self) -> None:
        while True:
            await self.refresh_once()
            await asyncio.sleep(REFRESH_EVERY)

    async def refresh_once(self) -> None:
        try:
            self.query_one(UsagePanel).usage = await self.client.usage(
                SINCE, "workspace", daily=True
            )
        except ApiError as e:
            self.notify(str(e), severity="error")

    def action_refresh(self) -> None:
        self.load()

    def action_back(self) -> None:
        self.app.pop_screen()
