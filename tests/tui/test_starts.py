"""When waiting runs start, in the queue's START column and on the timeline.

Fed by recorded daemon answers (frozen clock): the ``head`` fixture's queue has
known time limits, and each waiting run an estimate (``starts_by``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from textual.pilot import Pilot
from textual.widgets.data_table import RowKey

from astraeus_tui.app import AstraeusApp
from astraeus_tui.queue_model import Batch, QueueModel
from astraeus_tui.screens.main import MainScreen
from astraeus_tui.when import DAY, start_label, utc_clock
from astraeus_tui.widgets.head_banner import HeadBanner
from astraeus_tui.widgets.queue_table import QueueTable
from astraeus_tui.widgets.timeline import Timeline, ticks
from runner.clock import iso
from runner.durations import compact
from tests.tui.fake_client import FakeClient, as_runs, load_fixture
from tests.tui.helpers import Clock, cell, main_screen, plain, replay, until

# the head fixture's estimates: 12:45:28, 15:30:44 and 12:30:28, rounded up as "starts by"
EXPECTED = {"pretrain-7b": "12:46", "sweep-lr": "15:31", "nlp-big": "12:31",
            "eval-nightly": "", "ft-lowprio": ""}  # fmt: skip


def snapshot_run(fake: FakeClient, rid: str) -> dict[str, Any]:
    return dict(next(r for r in fake.data["snapshot"] if r["id"] == rid))


def chart_rows(timeline: Timeline) -> dict[str, str]:
    """The timeline's lines by the name they start with (the axis under "")."""
    lines = plain(timeline).splitlines()
    return {line.split("  ")[0].strip(): line for line in lines if line.strip()}


def test_the_start_column_shows_each_waiting_runs_estimate() -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, fake: FakeClient) -> None:
        table = screen.query_one(QueueTable)
        shown = {rid: cell(table, rid, "start") for rid in EXPECTED}
        assert shown == EXPECTED
        for run in fake.snapshot.runs:  # the same formatter as `astra ls`
            assert shown[run.id] == start_label(run, fake.now)

    replay("head", scenario)


def test_a_new_estimate_is_merged_in_place_and_none_shows_a_question_mark() -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, fake: FakeClient) -> None:
        table, timeline = screen.query_one(QueueTable), screen.query_one(Timeline)
        row = table.rows[RowKey("sweep-lr")]
        run = snapshot_run(fake, "sweep-lr")
        fake.push([dict(run, starts_by=None)])  # unlimited work in the way: no estimate
        await until(pilot, lambda: cell(table, "sweep-lr", "start") == "?")
        assert table.rows[RowKey("sweep-lr")] is row  # the same row, updated in place
        await until(pilot, lambda: "? start not known" in chart_rows(timeline).get("sweep-lr", ""))
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


def test_the_timeline_marks_the_first_waiting_runs_at_their_estimated_starts() -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, fake: FakeClient) -> None:
        timeline = screen.query_one(Timeline)
        rows = chart_rows(timeline)
        waiting = [name for name in rows if name in ("pretrain-7b", "sweep-lr", "nlp-big")]
        assert waiting == ["pretrain-7b", "sweep-lr", "nlp-big"]  # the planner's order
        head, axis = rows["pretrain-7b"], next(line for line in rows.values() if "now" in line)
        # the head's estimate is its shadow time: its marker stands under the axis' ▼
        assert head.index("◆") == axis.index("▼") == rows["eval-nightly"].index("┃")
        assert head[head.index("◆") :].startswith("◆ 12:46")
        assert rows["nlp-big"].index("◆") < head.index("◆")  # 12:31: before the head's
        assert rows["nlp-big"][rows["nlp-big"].index("◆") :].startswith("◆ 12:31")
        assert rows["sweep-lr"].rstrip().endswith("15:31 »")  # after the chart's end

    replay("head", scenario)


def test_at_80_columns_the_timeline_counts_what_does_not_fit_and_explains_itself() -> None:
    async def main() -> None:
        fake = FakeClient("preemption")
        app = AstraeusApp(fake, clock=fake.clock)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await main_screen(pilot)
            timeline = screen.query_one(Timeline)
            more = "… 2 more running · 3 more waiting"
            await pilot.press("v")  # narrow: one panel at a time
            await until(pilot, lambda: timeline.border_subtitle == more, message=more)
            rows = chart_rows(timeline)
            assert "urgent-fix" in rows and "pretrain-7b" not in rows
            legend = plain(timeline).splitlines()[-1].strip()
            assert legend.endswith("◆ queued start  » beyond the chart")  # all of it

    asyncio.run(main())


def test_the_model_lists_the_first_waiting_runs_in_the_planners_order() -> None:
    data = load_fixture("preemption")
    model = QueueModel()
    model.apply(Batch(snapshot=as_runs(data["snapshot"])))
    assert [r.name for r in model.waiting(3)] == ["urgent-fix", "pretrain-7b", "sweep-lr"]
    assert model.queued == 4
    model.apply(Batch(remove={"urgent-fix"}))
    assert [r.name for r in model.waiting(9)] == ["pretrain-7b", "sweep-lr", "nlp-big"]
    assert model.queued == 3
    now = data["now"]
    assert not model.new_day(now)  # the first look
    assert not model.new_day(now + 60)
    assert model.new_day(now + DAY)


def test_a_forecast_shows_as_the_likely_start_and_a_band_on_the_timeline() -> None:
    """Once finished runs give a forecast: ``~12:25`` in START, and the band from the
    likely start to the 90 % one behind the run's marker, which the legend names."""

    async def scenario(pilot: Pilot[Any], screen: MainScreen, fake: FakeClient) -> None:
        table, timeline = screen.query_one(QueueTable), screen.query_one(Timeline)
        run = snapshot_run(fake, "sweep-lr")
        likely, high = fake.now + 600, fake.now + 1800
        fake.push([dict(run, likely_start=iso(likely), likely_start_90=iso(high),
                        learned_from=37)])  # fmt: skip
        expected = "~" + utc_clock(round(likely / 60) * 60, seconds=False)
        await until(pilot, lambda: cell(table, "sweep-lr", "start") == expected)
        await until(pilot, lambda: "━" in chart_rows(timeline).get("sweep-lr", ""))
        row = chart_rows(timeline)["sweep-lr"]
        assert row.count("━") >= 2 and row.rstrip().endswith(f"{expected} »")  # bound: beyond
        assert "━ likely" in plain(timeline).splitlines()[-1]
        fake.push([dict(run, starts_by=None, likely_start=iso(likely),
                        likely_start_90=iso(high), learned_from=37)])  # fmt: skip
        # no bound (work without a limit in the way): the marker at the likely start
        await until(pilot, lambda: "◆" in chart_rows(timeline).get("sweep-lr", ""))
        assert "?" not in chart_rows(timeline)["sweep-lr"]

    replay("head", scenario)


def test_the_head_banner_gives_the_likely_start_before_its_bound() -> None:
    fake = FakeClient("head")
    head = next(r for r in fake.snapshot.runs if r.head)
    banner = HeadBanner()
    banner.now = fake.now
    likely = fake.now + 300
    near = utc_clock(round(likely / 60) * 60, seconds=False)
    shown = banner.when(msgspec.structs.replace(head, likely_start=iso(likely))).plain
    assert shown.startswith(f"likely ~{near} · starts by 12:46 UTC")
    unbound = msgspec.structs.replace(head, likely_start=iso(likely), starts_by=None)
    assert banner.when(unbound).plain == f"likely ~{near} · no bound: work without a limit"
    assert banner.when(msgspec.structs.replace(head, starts_by=None)).plain == "start time unknown"


def test_the_timeline_axis_says_each_time_where_it_is() -> None:
    """Each label ends at the column of its time, a round step apart: `+3m` said where
    3 min 45 s was drawn read wrong against the bars."""
    chart_w = 61
    for total in (300.0, 600.0, 3600.0, 2 * 3600.0, 86400.0):
        axis = Timeline()._axis(0, chart_w, total, None).plain[1:]
        assert axis.startswith("now")
        said = ticks(total)
        assert 1 <= len(said) <= 4 and all(t % 60 == 0 for t in said)
        for t in said:
            label = f"+{compact(t, cell=True)}"
            x = min(chart_w - 1, round(t / total * (chart_w - 1)))
            assert axis[x - len(label) + 1 : x + 1] == label, (total, t, axis)
