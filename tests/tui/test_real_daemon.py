"""The dashboard on a real daemon over its socket, with a queue of hundreds of runs.

Its snapshot is one SSE line of more than half a megabyte (the dashboard once never
showed such a queue); the table shows every run in the daemon's order, the cursor
reaches the last one, and a delete made elsewhere leaves the table.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from astraeus_tui.app import AstraeusApp
from astraeus_tui.client import AsyncClient, Client
from astraeus_tui.widgets.queue_table import QueueTable
from tests.support.long_queue import QUEUED, fill
from tests.support.served import Served
from tests.tui.helpers import main_screen, until


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Served]:
    folder = Path(tempfile.mkdtemp(prefix="astra-sock-"))  # a socket path short enough
    served = Served(tmp_path / "home", folder / "astraeus.sock")
    try:
        yield served.start(gpus=1, machine="max_submit_per_user = 5000")
    finally:
        served.stop()
        shutil.rmtree(folder, ignore_errors=True)


def test_the_dashboard_shows_a_long_queue_from_a_real_daemon(daemon: Served) -> None:
    fill(daemon.socket, QUEUED)
    client = Client(daemon.socket)

    async def main() -> None:
        app = AstraeusApp(AsyncClient(daemon.socket))
        async with app.run_test(size=(120, 36)) as pilot:
            screen = await main_screen(pilot)
            table = screen.query_one(QueueTable)
            await until(pilot, lambda: table.row_count == QUEUED + 1, 30, "every run")
            await until(pilot, lambda: str(table.get_cell("wait-0000", "mark")).startswith("▶"))
            names = [str(table.get_row_at(i)[1]) for i in (0, 1, QUEUED)]
            assert names == ["blocker", "wait-0000", f"wait-{QUEUED - 1:04d}"]
            await pilot.press("ctrl+end")
            assert table.selected_key == f"wait-{QUEUED - 1:04d}"
            assert table.scroll_y == table.max_scroll_y > 0  # scrolled to the last row

            await asyncio.to_thread(client.delete, "wait-0003")
            await until(pilot, lambda: "wait-0003" not in table.rows, 30, "the delete")
            assert table.row_count == QUEUED
            await until(pilot, lambda: str(table.get_cell("wait-0004", "mark")).strip() == "4")

    asyncio.run(main())
