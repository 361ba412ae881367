"""The dashboard's edit dialog and drain marks: against a real daemon, and as pictures.

The run page's `e` edits a waiting run (the daemon's refusal shown in one line, nothing
changed; a change that lets it start does); the header says the machine drains and the
GPU panel which GPUs are drained.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Input, Static

from astraeus_tui.app import AstraeusApp
from astraeus_tui.client import Client
from astraeus_tui.screens.detail import RunDetailScreen
from astraeus_tui.screens.edit import EditRunScreen, changes
from astraeus_tui.screens.main import MainScreen
from astraeus_tui.widgets.gpu_panel import GpuPanel
from astraeus_tui.widgets.header_bar import HeaderBar, drain_text
from runner.schema import Run
from tests.support.harness import sleeper, spec
from tests.support.served import Served
from tests.tui.helpers import drive, highlight, screen_of, settled, text, until
from tests.tui.scenes import draining


def test_the_edit_dialog_shows_a_refusal_then_the_change_starts_the_run(
    served: Callable[..., Served],
) -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        await until(pilot, lambda: client.show("big").state == "Running", message="big runs")
        await highlight(pilot, screen, "waiter")
        await pilot.press("enter")
        detail = await screen_of(pilot, RunDetailScreen)
        await until(pilot, lambda: detail.run is not None, message="the run loaded")
        before = client.show("waiter")
        await pilot.press("e")
        dialog = await screen_of(pilot, EditRunScreen)
        dialog.query_one("#gpus", Input).value = "9"
        await pilot.press("enter")
        error = dialog.query_one("#error", Static)
        expected = "422 INVALID_SPEC: gpus: asks for 9, the machine has 4 in all"
        await until(pilot, lambda: text(error) == expected, message="the 422")
        assert client.show("waiter").spec == before.spec
        dialog.query_one("#gpus", Input).value = "1"
        dialog.query_one("#time-limit", Input).value = "2h"
        await pilot.press("enter")
        await until(pilot, lambda: pilot.app.screen is detail, message="the dialog closes")
        await until(pilot, lambda: client.show("waiter").state == "Running", message="started")
        after = client.show("waiter")
        assert after.gpus_requested == 1 and after.time_limit_seconds == 7200

    drive(served, scenario, spec("big", sleeper(), gpus=3, workspace="vision"),
          spec("waiter", sleeper(), gpus=2, workspace="vision"))  # fmt: skip


def test_the_header_says_the_machine_drains(served: Callable[..., Served]) -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        client.drain("kernel upgrade")
        client.drain("fan failing", [3])
        header = screen.query_one(HeaderBar)
        wanted = "DRAINING (kernel upgrade) · GPU 3 drained (fan failing)"
        await until(pilot, lambda: wanted in header.machine().plain, 20, "the header")
        panel = screen.query_one(GpuPanel)
        await until(pilot, lambda: panel.gpus is not None and panel.gpus.gpus[3].drained,
                    message="the GPU panel")  # fmt: skip

    drive(served, scenario)


def test_only_the_changed_fields_are_sent() -> None:
    run = Run(id="r", name="r", workspace="vision", state="Queued", gpus_requested=2,
              cpu_cores_requested=4.0, memory_requested=64 << 30, priority=1,
              time_limit_seconds=5400)  # fmt: skip
    same = {"time-limit": "90m", "gpus": "2", "cpus": "4", "memory": "64GiB", "priority": "1"}
    assert changes(run, same) == {}
    assert changes(run, {**same, "time-limit": "", "cpus": "2.5"}) == {
        "time_limit_seconds": None, "cpu_cores": 2.5}  # fmt: skip
    assert drain_text({"machine": None, "gpus": []}) == ""


def test_main_screen_while_draining(snap_compare: Any) -> None:
    fake = draining()
    app = AstraeusApp(fake, clock=fake.clock)
    assert snap_compare(app, terminal_size=(120, 36), run_before=settled)


def test_the_header_says_when_asks_are_not_enforced() -> None:
    header = HeaderBar()
    header.status = {"executor": "process", "simulated": True, "stop_grace_seconds": 30,
                     "not_enforced": "memory and CPU asks not enforced: the daemon does not "
                                     "run as root"}  # fmt: skip
    assert "process executor · asks not enforced · stop grace 30 s" in header.machine().plain
    header.status = {**header.status, "not_enforced": None}
    assert "not enforced" not in header.machine().plain
    header.gpus = 1
    assert header.machine().plain.startswith("1 simulated GPU ·")  # not "1 simulated GPUs"
    header.gpus = 4
    assert header.machine().plain.startswith("4 simulated GPUs ·")
