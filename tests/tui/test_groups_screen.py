"""The groups screen against a real daemon: listed, scaled, paused, deleted with the keys."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from astraeus_tui.client import Client
from astraeus_tui.screens.dialogs import ConfirmScreen
from astraeus_tui.screens.groups import GroupsScreen
from astraeus_tui.screens.main import MainScreen
from tests.support.harness import PY, sleeper, spec
from tests.support.served import Served
from tests.tui.helpers import drive, screen_of, text, until


def test_groups_are_shown_scaled_paused_and_deleted(served: Callable[..., Served]) -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        pool = spec("pool", sleeper(), workspace="vision")
        client.create_group({"kind": "replicas", "template": pool, "replicas": 1})
        job = spec("nightly", [PY, "-c", "pass"], workspace="vision")
        client.create_group({"kind": "schedule", "template": job, "cron": "0 3 * * *"})
        await pilot.press("g")
        groups = await screen_of(pilot, GroupsScreen)
        table = groups.query_one(DataTable)
        await until(pilot, lambda: table.row_count == 2, message="two groups")
        assert [str(c) for c in table.get_row_at(0)][:2] == ["replicas", "pool"]
        detail = groups.query_one("#group", Static)
        await until(pilot, lambda: "pool-0" in text(detail), message="the replica's run")
        await until(pilot, lambda: "1/1 running" in str(table.get_row_at(0)[4]), 20)
        await pilot.press("plus")
        await until(pilot, lambda: client.group("pool").replicas == 2, message="scaled")
        await until(pilot, lambda: "/2 running" in str(table.get_row_at(0)[4]), message="2")
        await pilot.press("down")
        await pilot.press("space")
        await until(pilot, lambda: client.group("nightly").paused, message="paused")
        await until(pilot, lambda: "paused" in str(table.get_row_at(1)[4]))
        await pilot.press("up", "d")
        await screen_of(pilot, ConfirmScreen)
        await pilot.press("y")
        await until(pilot, lambda: [g.name for g in client.groups()] == ["nightly"])
        await until(pilot, lambda: table.row_count == 1, message="the table follows")
        await pilot.press("escape")
        await until(pilot, lambda: pilot.app.screen is screen)

    drive(served, scenario)
