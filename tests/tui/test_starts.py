"""When waiting runs start, in the queue's START column.

Fed by recorded daemon answers (frozen clock): the ``head`` fixture's queue has
known time limits, and each waiting run an estimate (``starts_by``).
"""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot
from textual.widgets.data_table import RowKey

from astraeus_tui.screens.main import MainScreen
from astraeus_tui.screens.queue_model import QueueModel
from astraeus_tui.widgets.fmt import DAY, start_label
from astraeus_tui.widgets.queue_table import QueueTable
from tests.tui.fake_client import FakeClient, load_fixture
from tests.tui.helpers import until
from tests.tui.test_live import Clock, cell, replay

# the head fixture's estimates: 12:45:28, 15:30:44 and 12:30:28, rounded up as "starts by"
EXPECTED = {"pretrain-7b": "12:46", "sweep-lr": "15:31", "nlp-big": "12:31",
            "eval-nightly": "", "ft-lowprio": ""}  # fmt: skip


def snapshot_run(fake: FakeClient, rid: str) -> dict[str, Any]:
    return dict(next(r for r in fake.data["snapshot"] if r["id"] == rid))


def test_the_start_column_shows_each_waiting_runs_estimate() -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, fake: FakeClient) -> None:
        table = screen.query_one(QueueTable)
        shown = {rid: cell(table, rid, "start") for rid in EXPECTED}
        assert shown == EXPECTED
        for run in fake.data["snapshot"]:  # the same formatter as `astra ls`
            assert shown[run["id"]] == start_label(run, fake.now)

    replay("head", scenario)


def test_a_new_estimate_is_merged_in_place_and_none_shows_a_question_mark() -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, fake: FakeClient) -> None:
        table = screen.query_one(QueueTable)
        row = table.rows[RowKey("sweep-lr")]
        run = snapshot_run(fake, "sweep-lr")
        fake.push([dict(run, starts_by=None)])  # unlimited work in the way: no estimate
        await until(pilot, lambda: cell(table, "sweep-lr", "start") == "?")
        assert table.rows[RowKey("sweep-lr")] is row  # the same row, updated in place
        fake.push([dict(run, starts_by="2026-10-02T09:00:00Z")])
        await until(pilot, lambda: cell(table, "sweep-lr", "start") == "10-02 09:00")
        fake.push([dict(run, state="Running", started_at="2026-10-01T12:00:30Z", position=None)])
        await until(pilot, lambda: cell(table, "sweep-lr", "start") == "")

    replay("head", scenario)


def test_the_start_shows_its_date_once_the_day_turns() -> None:
    clock = Clock(FakeClient("head").now)

    async def scenario(pilot: Pilot[Any], screen: MainScreen, fake: FakeClient) -> None:
        table = screen.query_one(QueueTable)
        assert cell(table, "pretrain-7b", "start") == "12:46"
        clock.now += DAY
        screen.tick()
        assert cell(table, "pretrain-7b", "start") == "10-01 12:46"

    replay("head", scenario, clock)


def test_the_model_says_when_the_day_turns() -> None:
    now = load_fixture("head")["now"]
    model = QueueModel()
    assert not model.new_day(now)  # the first look
    assert not model.new_day(now + 60)
    assert model.new_day(now + DAY)
