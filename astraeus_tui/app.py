"""The Textual dashboard: ``astra up`` and ``astra dash`` open it.

The app only holds what every screen shares: the daemon's client (any
``DashboardApi``: the real ``AsyncClient``, or a test's fake, seen through
``EscapedApi`` so no raw control character reaches a widget) and the clock
(tests freeze it). Screens own their handlers; widgets draw.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import ClassVar

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.notifications import SeverityLevel
from textual.screen import Screen

from astraeus_tui.client import AsyncClient, DashboardApi
from astraeus_tui.escaped import EscapedApi
from astraeus_tui.text import shown


class AstraeusApp(App[None]):
    TITLE = "Astraeus"
    CSS_PATH = "app.tcss"
    ENABLE_COMMAND_PALETTE = True
    # Textual declares these two as plain class attributes, hence no ClassVar
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide"), (170, "-huge")]  # noqa: RUF012
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall"), (50, "-towering")]  # noqa: RUF012
    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "quit", "Quit")]

    def __init__(self, client: DashboardApi, clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.client: DashboardApi = EscapedApi(client)  # nothing raw reaches a widget
        self.clock = clock

    def on_mount(self) -> None:
        from astraeus_tui.screens.main import MainScreen

        self.theme = "textual-dark"
        self.push_screen(MainScreen(self.client, self.clock))

    async def on_unmount(self) -> None:
        await self.client.close()

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Every toast (errors hold the daemon's text) escaped and never read as markup."""
        super().notify(shown(message), title=shown(title), severity=severity, timeout=timeout,
                       markup=False)  # fmt: skip

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        """Every key binding of the screen in front is also a palette entry."""
        for binding in screen.BINDINGS:
            if isinstance(binding, Binding) and binding.description:
                key = binding.key_display or binding.key
                yield SystemCommand(
                    binding.tooltip or binding.description,
                    f"Key: {key}",
                    _runner(screen, binding.action),
                )
        yield from super().get_system_commands(screen)


def _runner(screen: Screen[object], action: str) -> Callable[[], object]:
    return lambda: screen.run_action(action)


def run_dashboard(socket_path: Path) -> None:
    """Open the dashboard on the daemon at ``socket_path``; returns when it is closed."""
    AstraeusApp(AsyncClient(socket_path)).run()
