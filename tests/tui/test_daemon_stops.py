"""The daemon stops while the run page follows a silent run's log: the daemon exits
within seconds, the page says the output stopped with the daemon (not that the run
finished), and the header says the daemon is gone."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Log

from astraeus_tui.app import AstraeusApp
from astraeus_tui.client import Client
from astraeus_tui.screens.detail import RunDetailScreen
from astraeus_tui.screens.main import MainScreen
from astraeus_tui.widgets.header_bar import HeaderBar
from tests.support.harness import sleeper, spec
from tests.support.served import Served
from tests.tui.helpers import drive, screen_of, until


def test_the_run_page_sees_the_daemon_stop(served: Callable[..., Served]) -> None:
    daemons: list[Served] = []

    def keep(*args: Any, **kwargs: Any) -> Served:
        daemons.append(served(*args, **kwargs))
        return daemons[-1]

    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        await until(pilot, lambda: client.show("quiet").state == "Running", message="running")
        app = pilot.app
        assert isinstance(app, AstraeusApp)
        await app.push_screen(RunDetailScreen(app.client, app.clock, "quiet"))
        detail = await screen_of(pilot, RunDetailScreen)
        await until(pilot, lambda: detail.run is not None, message="the run page")
        await pilot.pause(1.0)  # its log is followed: nothing said
        proc = daemons[0].proc
        assert proc is not None
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        status = await asyncio.to_thread(proc.wait, 30)
        assert status == 0 and time.monotonic() - began < 10
        log = detail.query_one(Log)
        stopped = "── output stopped: the daemon stopped ──"
        await until(pilot, lambda: stopped in log.lines, message="the end of the log")
        assert not any("the run has finished" in line for line in log.lines)
        header = screen.query_one(HeaderBar)
        await until(pilot, lambda: not header.connected, message="the header")

    drive(keep, scenario, spec("quiet", sleeper()))
