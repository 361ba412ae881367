"""The usage screen (`u`): each workspace's last 7 days as bars, from a real daemon, and
its picture from a fixed answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.pilot import Pilot

from astraeus_tui.app import AstraeusApp
from astraeus_tui.client import Client
from astraeus_tui.screens.main import MainScreen
from astraeus_tui.screens.usage import UsageScreen
from astraeus_tui.widgets.usage_panel import UsagePanel
from tests.support.harness import PY, spec
from tests.support.served import Served
from tests.tui.fake_client import FIXTURES
from tests.tui.helpers import drive, main_screen, plain, screen_of, until
from tests.tui.scenes import fake_with_usage, usage_app


def test_u_shows_each_workspaces_finished_runs_and_escape_goes_back(
    served: Callable[..., Served],
) -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        client.submit(spec("trained", [PY, "-c", "import time; time.sleep(0.5)"], gpus=2,
                           workspace="vision"))  # fmt: skip
        client.submit(spec("crashed", [PY, "-c", "exit(1)"], workspace="nlp", restart_limit=0))
        await until(pilot, lambda: len(client.history().runs) == 2, 30, "two finished runs")
        await pilot.press("u")
        usage = await screen_of(pilot, UsageScreen)
        panel = usage.query_one(UsagePanel)
        await until(pilot, lambda: panel.usage is not None, message="the usage")
        assert panel.usage is not None
        rows = {r.workspace: r for r in panel.usage.rows}
        assert rows["vision"].outcomes["succeeded"] == 1 and rows["vision"].gpu_hours > 0
        assert rows["nlp"].outcomes["failed"] == 1 and rows["nlp"].gpu_hours == 0
        vision_days = rows["vision"].daily_gpu_hours
        assert isinstance(vision_days, list) and len(vision_days) == 7
        assert vision_days[-1] == rows["vision"].gpu_hours and sum(vision_days[:-1]) == 0
        shown = plain(panel)
        assert "vision" in shown and "nlp" in shown and "failed" in shown
        assert "█" in shown  # vision's GPU-hours bar
        await pilot.press("escape")
        await screen_of(pilot, MainScreen)

    drive(served, scenario)


async def on_usage_screen(pilot: Pilot[Any]) -> None:
    await main_screen(pilot)
    await pilot.press("u")
    screen = await screen_of(pilot, UsageScreen)
    panel = screen.query_one(UsagePanel)
    await until(pilot, lambda: panel.usage is not None, message="the usage")
    await pilot.pause()


def test_usage_screen_asks_for_the_last_7_days_by_workspace() -> None:
    import asyncio

    fake = fake_with_usage()

    async def main() -> None:
        app = AstraeusApp(fake, clock=fake.clock)
        async with app.run_test(size=(120, 36)) as pilot:
            await on_usage_screen(pilot)
            text = plain(pilot.app.screen.query_one(UsagePanel))
            assert "96.2 h" in text and "38.5 h" in text and "402 h" in text
            assert "Runs finished since 2026-09-24 12:00 UTC" in text

    asyncio.run(main())
    assert ("usage", ("7d", "workspace", True)) in fake.calls
    assert (FIXTURES / "usage" / "week.json").is_file()


def test_usage_screen(snap_compare: Any) -> None:
    """`u`: a week of three workspaces, GPU-hours and core-hours as bars."""
    assert snap_compare(usage_app(), terminal_size=(120, 36), run_before=on_usage_screen)
