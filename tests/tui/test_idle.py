"""Idle GPUs in the dashboard, against a real daemon on simulated GPUs: the queue's row of
a run whose GPUs do nothing opens its reason with ``idle <time> ·``, a working run's does
not, and the run's page says since when."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rich.console import Console
from textual.pilot import Pilot

from astraeus_tui.app import AstraeusApp
from astraeus_tui.client import Client
from astraeus_tui.screens.detail import RunDetailScreen, facts
from astraeus_tui.screens.main import MainScreen
from astraeus_tui.widgets.queue_table import COLUMN_AT, QueueTable
from tests.support.harness import sleeper, spec, spinner
from tests.support.served import Served
from tests.tui.fake_client import FakeClient, load_fixture
from tests.tui.helpers import drive, highlight, screen_of, settled, until

FAST = 'telemetry_seconds = 0.2\nidle_gpu_after = "1s"'


def _reason(table: QueueTable, name: str) -> str:
    return str(table.get_row_at(table.get_row_index(name))[COLUMN_AT["reason"]])


def test_the_queue_and_the_run_page_show_an_idle_run(served: Callable[..., Served]) -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        await until(pilot, lambda: isinstance(client.show("napper").idle_since, str), 30, "idle")
        await until(
            pilot,
            lambda: isinstance(getattr(screen.model.runs.get("napper"), "idle_since", None), str),
            message="the queue knows",
        )
        table = screen.query_one(QueueTable)
        await until(pilot, lambda: _reason(table, "napper").startswith("idle "), message="mark")
        assert "idle" not in _reason(table, "worker")
        assert client.show("worker").state == "Running"
        await highlight(pilot, screen, "napper")
        await pilot.press("enter")
        detail = await screen_of(pilot, RunDetailScreen)
        await until(pilot, lambda: detail.run is not None)
        assert detail.run is not None
        console = Console(width=120)
        with console.capture() as shown:
            console.print(facts(detail.run))
        assert "Running · GPUs idle " in shown.get() and "(since " in shown.get()

    drive(
        served, scenario, spec("napper", sleeper(), gpus=1), spec("worker", spinner(), gpus=1),
        machine=FAST,
    )  # fmt: skip


def idle_queue() -> dict[str, Any]:
    """The recorded head state with ft-lowprio's GPU idle for 25 minutes."""
    data = json.loads(json.dumps(load_fixture("head")))
    for run in data["snapshot"]:
        if run["name"] == "ft-lowprio":
            run.update(started_at="2026-10-01T11:00:00Z", idle_since="2026-10-01T11:35:21Z")
    return data


def test_an_idle_run_in_the_queue(snap_compare: Any) -> None:
    fake = FakeClient(idle_queue())
    app = AstraeusApp(fake, clock=fake.clock)
    assert snap_compare(app, terminal_size=(120, 36), run_before=settled)
