"""Live updates, fed by recorded daemon answers: merged in place, counted down, marked."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any
from unittest.mock import ANY

import msgspec
from textual.pilot import Pilot
from textual.widgets import Input
from textual.widgets.data_table import RowKey

from astraeus_tui.app import AstraeusApp
from astraeus_tui.client import ApiError
from astraeus_tui.screens.main import MainScreen
from astraeus_tui.screens.submit import SubmitScreen
from astraeus_tui.widgets.head_banner import HeadBanner
from astraeus_tui.widgets.header_bar import HeaderBar
from astraeus_tui.widgets.preemption_panel import PreemptionPanel
from astraeus_tui.widgets.queue_table import QueueTable
from runner.schema import Gpu, Run
from tests.tui.fake_client import FakeClient, typed
from tests.tui.helpers import Clock, cell, plain, replay, screen_of, settled, until


def test_changes_are_merged_into_the_rows_in_place() -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, fake: FakeClient) -> None:
        table = screen.query_one(QueueTable)
        row = table.rows[RowKey("sweep-lr")]
        run = next(r for r in fake.data["snapshot"] if r["id"] == "sweep-lr")
        fake.push([dict(run, priority=-3, position=9, reason="Waits for something else")])
        await until(pilot, lambda: cell(table, "sweep-lr", "reason") == "Waits for something else")
        assert table.rows[RowKey("sweep-lr")] is row  # the same row, updated in place
        assert cell(table, "sweep-lr", "priority") == "-3"
        assert table.get_row_index("sweep-lr") == table.row_count - 1  # moved to its position
        fake.push([], ["nlp-big"])
        await until(pilot, lambda: "nlp-big" not in table.rows)

    replay("backfill", scenario)


def test_a_backfilled_run_is_marked_from_its_events() -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, fake: FakeClient) -> None:
        table = screen.query_one(QueueTable)
        assert screen.model.backfilled == {"quick-test"}
        assert "bf" in cell(table, "quick-test", "mark")
        assert "▶" in cell(table, "pretrain-7b", "mark")
        assert "bf" not in cell(table, "eval-nightly", "mark")

    replay("backfill", scenario)


def test_the_grace_counts_down_with_the_clock() -> None:
    fake_now = FakeClient("preemption").now
    clock = Clock(fake_now)

    async def scenario(pilot: Pilot[Any], screen: MainScreen, fake: FakeClient) -> None:
        panel = screen.query_one(PreemptionPanel)
        assert panel.display
        assert [v.name for v in panel.victims] == ["ft-lowprio"]
        left = panel.left(panel.victims[0])
        assert left is not None and 5 < left < 8
        clock.now += 3
        screen.tick()
        assert panel.left(panel.victims[0]) == max(0.0, left - 3)
        assert "starts as victims stop" in plain(screen.query_one(HeadBanner))

    replay("preemption", scenario, clock)


def test_every_action_is_in_the_command_palette() -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, fake: FakeClient) -> None:
        titles = {c.title for c in pilot.app.get_system_commands(screen)}
        for action in ("New run", "priority", "Delete", "logs", "head", "Search", "Sort"):
            assert any(action in t for t in titles), (action, titles)

    replay("idle", scenario)


class NoDaemon(FakeClient):
    async def changes(self) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        raise ApiError(0, "NO_DAEMON", "no daemon answers on /nowhere")
        yield  # an async generator that fails at once


def test_a_lost_daemon_is_shown() -> None:
    async def main() -> None:
        fake = NoDaemon("idle")
        app = AstraeusApp(fake, clock=fake.clock)
        async with app.run_test(size=(120, 36)) as pilot:
            header = app.screen.query_one(HeaderBar)
            await until(pilot, lambda: header.connected is False)
            assert "no daemon" in plain(header)

    asyncio.run(main())


class OtherVersion(FakeClient):
    """A daemon of another version: its answer to a submit is no run this dashboard reads."""

    def answer_submit(self, document: object) -> Run:
        return msgspec.convert({"name": 7}, Run)


def test_an_answer_the_dashboard_cannot_read_is_said_not_lost() -> None:
    """An action that fails on what it does not catch (not an ``ApiError``) says so in a
    toast; the New run form stays open with what was typed (it used to stay open silent)."""

    async def main() -> None:
        fake = OtherVersion("idle")
        app = AstraeusApp(fake, clock=fake.clock)
        async with app.run_test(size=(120, 36)) as pilot:
            await settled(pilot)
            await pilot.press("n")
            form = await screen_of(pilot, SubmitScreen)
            form.query_one("#name", Input).value = "mine"
            form.query_one("#command", Input).value = "true"
            assert await pilot.click("#submit")
            said = await until(
                pilot, lambda: [n for n in app._notifications if n.title == "Dashboard"]
            )
            assert said[0].message.startswith("could not finish send: Expected `str`, got `int`")
            assert said[0].severity == "error" and "\n" not in said[0].message
            assert app.screen is form and form.query_one("#name", Input).value == "mine"
            assert ("submit", ANY) in fake.calls

    asyncio.run(main())


def test_a_real_gpu_row_has_bars_and_readings() -> None:
    """No NVML here: a GPU as /v1/gpus reports one (see runner/api/machine.py)."""
    from astraeus_tui.widgets.gpu_panel import gpu_row

    gpu = {"index": 3, "simulated": False, "utilization": 45, "temperature": 83,
           "memory_used": 40 * 1024**3, "memory_total": 80 * 1024**3,
           "holder": None, "held_for": None, "foreign_pids": [4242]}  # fmt: skip
    index, util, memory, temp, holder = (t.plain for t in gpu_row(typed(Gpu, gpu)))
    assert (index, temp, holder) == ("3", "83°", "foreign process (pid 4242)")
    assert util == "██▋░░░ 45%"
    assert memory == "██▌░░ 40G"
    assert gpu_row(typed(Gpu, dict(gpu, foreign_pids=[], held_for="big")))[4].plain == (
        "held for big"
    )
    assert gpu_row(typed(Gpu, dict(gpu, foreign_pids=[])))[4].plain == "free"


def test_a_reason_with_control_characters_is_drawn_escaped() -> None:
    hostile = "[b]Could not start[/b]: /data\x1b]0;pwned\x07\x1b[2J\u202e"

    async def scenario(pilot: Pilot[Any], screen: MainScreen, fake: FakeClient) -> None:
        table = screen.query_one(QueueTable)
        run = next(r for r in fake.data["snapshot"] if r["id"] == "sweep-lr")
        fake.push([dict(run, reason=hostile)])
        await until(pilot, lambda: "Could not start" in cell(table, "sweep-lr", "reason"))
        shown = cell(table, "sweep-lr", "reason")
        assert shown == "[b]Could not start[/b]: /data\\x1b]0;pwned\\x07\\x1b[2J\\u202e"

    replay("backfill", scenario)


def test_a_toast_with_the_daemon_s_text_is_escaped_and_not_markup() -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, fake: FakeClient) -> None:
        screen.notify("409 CONFLICT: [red]run x\x1b[2J", severity="error")
        await pilot.pause()
        toast = list(pilot.app._notifications)[-1]
        assert (toast.message, toast.markup) == ("409 CONFLICT: [red]run x\\x1b[2J", False)

    replay("backfill", scenario)
