"""A run that failed and waits for its restart back-off, and a waiting run's estimate, on
the dashboard against a real daemon: the timeline marks the time START gives, and the
run's page, at 80×24, shows what it needs (its estimate to the minute as START says it,
every attempt, when it starts again), the page scrolling."""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from textual.containers import VerticalScroll
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from astraeus_tui.app import AstraeusApp
from astraeus_tui.client import AsyncClient, Client
from astraeus_tui.screens.detail import RunDetailScreen
from astraeus_tui.screens.main import MainScreen
from astraeus_tui.when import start_label
from astraeus_tui.widgets.timeline import Timeline
from tests.support.harness import sleeper, spec
from tests.support.served import Served
from tests.tui.helpers import (
    WORKSPACES,
    drive,
    highlight,
    main_screen,
    plain,
    screen_of,
    stop_now,
    until,
)

TYPO = ["sh", "-c", "exit 2"]  # fails at once, as a mistyped command does
WAIT = 'restart_backoff = "2m"'  # long enough to look at


def shown(widget: Static) -> str:
    """What a Static holding a Rich renderable shows, as text."""
    console = Console(width=widget.size.width or 80, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


def _row(timeline: Timeline, name: str) -> str:
    return next((line for line in plain(timeline).splitlines() if line.startswith(name)), "")


def test_the_timeline_marks_a_run_backing_off_when_it_starts_again(
    served: Callable[..., Served],
) -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        await until(pilot, lambda: isinstance(client.show("typo").restart_at, str), 20,
                    "the back-off")  # fmt: skip
        again = str(client.show("typo").restart_at)[11:19]
        run = await until(pilot, lambda: screen.model.runs.get("typo"), message="shown")
        await until(pilot, lambda: screen.model.runs["typo"].restart_at, message="restart_at")
        assert start_label(screen.model.runs["typo"], 0) == again  # the START column
        timeline = screen.query_one(Timeline)
        await until(pilot, lambda: f"◆ {again}" in _row(timeline, "typo"), 10,
                    f"◆ {again} on the timeline", lambda: _row(timeline, "typo"))  # fmt: skip
        assert "not known" not in _row(timeline, "typo"), run

    drive(served, scenario, spec("typo", TYPO, gpus=1), machine=WAIT)


def test_the_run_page_at_80x24_shows_every_attempt_and_its_estimate_to_the_minute(
    served: Callable[..., Served],
) -> None:
    daemon = served(
        WORKSPACES, gpus=2, machine='restart_backoff = "1s"\nrestart_backoff_max = "2m"'
    )
    client = Client(daemon.socket)
    client.submit(spec("busy", sleeper(), gpus=1, limit=3600, workspace="vision"))
    client.submit(spec("waits", sleeper(), gpus=2, workspace="vision"))  # by busy's limit
    client.submit(spec("typo", TYPO, gpus=1, priority=5, workspace="vision"))

    async def main() -> None:
        app = AstraeusApp(AsyncClient(daemon.socket))
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await main_screen(pilot)
            await until(pilot, lambda: client.show("typo").restarts >= 6, 60, "six failures")
            await highlight(pilot, screen, "typo")
            await pilot.press("enter")
            page = await screen_of(pilot, RunDetailScreen)
            history: DataTable[Any] = page.query_one("#history", DataTable)
            await until(pilot, lambda: history.row_count >= 6, message="its attempts")
            facts_of = page.query_one("#facts", Static)
            await until(pilot, lambda: "again at" in shown(facts_of), 40, "again at",
                        lambda: shown(facts_of))  # fmt: skip
            await pilot.pause()
            assert page.has_class("-short")  # one panel under the other
            assert history.size.height >= history.row_count + 1  # every attempt, none cut
            facts = shown(page.query_one("#facts", Static))
            assert "again at" in facts and "UTC (in " in facts  # its line whole
            scroll = page.query_one("#page", VerticalScroll)
            assert scroll.max_scroll_y > 0  # the rest is a scroll away
            scroll.scroll_to_widget(history, animate=False)
            await pilot.pause()
            assert history.region.height > 0 and history.region.y >= 0

            await pilot.press("escape")
            await highlight(pilot, screen, "waits")
            await pilot.press("enter")
            page = await screen_of(pilot, RunDetailScreen)
            facts_widget = page.query_one("#facts", Static)
            await until(pilot, lambda: "starts by" in shown(facts_widget) and page.run)
            run = client.show("waits")
            label = start_label(run, time.time())  # 14:21, rounded up, as START says it
            assert len(label) == 5, label
            line = next(s for s in shown(facts_widget).splitlines() if "starts by" in s)
            assert line.split() == ["starts", "by", label], line

    try:
        asyncio.run(main())
    finally:
        stop_now(daemon)
