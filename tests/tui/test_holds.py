"""The hold key (``o``): on the queue and on the run's page, against a real daemon; and
a held run in the queue, pixel for pixel."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.pilot import Pilot

from astraeus_tui.client import Client
from astraeus_tui.screens.detail import RunDetailScreen
from astraeus_tui.screens.main import MainScreen
from astraeus_tui.widgets.queue_table import QueueTable
from tests.support.harness import sleeper, spec
from tests.support.served import Served
from tests.tui.helpers import drive, highlight, screen_of, settled, until
from tests.tui.scenes import app_with_a_held_run


def test_the_hold_key_holds_and_releases_the_highlighted_run(
    served: Callable[..., Served],
) -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        await until(pilot, lambda: client.show("busy").state == "Running", message="busy runs")
        await highlight(pilot, screen, "waiting")
        await pilot.press("o")
        await until(pilot, lambda: client.show("waiting").held, message="held")
        await until(pilot, lambda: screen.model.runs["waiting"].held, message="shown held")
        await until(
            pilot, lambda: screen.model.runs["waiting"].reason == "Held by root", message="why"
        )
        table = screen.query_one(QueueTable)
        assert "held" in str(table.get_row_at(table.get_row_index("waiting"))[0])
        await pilot.press("o")
        await until(pilot, lambda: not client.show("waiting").held, message="released")
        await pilot.press("enter")  # the run's page has the key too
        detail = await screen_of(pilot, RunDetailScreen)
        await until(pilot, lambda: detail.run is not None)
        await pilot.press("o")
        await until(pilot, lambda: client.show("waiting").held, message="held from its page")
        assert client.show("busy").state == "Running"  # a hold touches nothing else

    drive(served, scenario, spec("busy", sleeper(), gpus=4), spec("waiting", sleeper(), gpus=2))


def test_the_hold_key_on_a_running_run_says_why_not(served: Callable[..., Served]) -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        await until(pilot, lambda: client.show("busy").state == "Running", message="busy runs")
        await highlight(pilot, screen, "busy")
        await pilot.press("o")
        want = (
            "409 WRONG_STATE: run busy is Running: only a queued run can be held (it has started)"
        )
        await until(
            pilot, lambda: any(n.message == want for n in pilot.app._notifications), message=want
        )
        assert not client.show("busy").held

    drive(served, scenario, spec("busy", sleeper(), gpus=4))


def test_a_held_run_in_the_queue(snap_compare: Any) -> None:
    assert snap_compare(app_with_a_held_run(), terminal_size=(120, 36), run_before=settled)
