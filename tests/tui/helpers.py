"""What the dashboard's tests share: waiting on conditions (never sleeps that stand in for
asserts), the app against a real daemon (``drive``), against recorded answers
(``app_for``, ``replay`` with a clock the test moves), and the New run form filled as a
person fills it."""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console
from textual.containers import VerticalScroll
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Collapsible, Static, TextArea

from astraeus_tui.app import AstraeusApp
from astraeus_tui.client import AsyncClient, Client
from astraeus_tui.screens.main import MainScreen
from astraeus_tui.screens.submit import SubmitScreen
from astraeus_tui.widgets.queue_table import QueueTable
from tests.support.served import Served
from tests.tui.fake_client import FakeClient

S = TypeVar("S", bound=Screen[Any])
WORKSPACES = """
[workspaces.vision]
members = ["*"]
max_priority = 10
quota = { gpus = 8 }

[workspaces.nlp]
members = ["*"]
"""


async def until(pilot: Pilot[Any], what: Callable[[], Any], timeout: float = 15,
                message: str = "", seen: Callable[[], str] | None = None) -> Any:  # fmt: skip
    """Let the app run until ``what()`` is true; fail after ``timeout`` seconds, saying
    ``seen()`` then (what the app shows instead) where given."""
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value:
            return value
        if time.monotonic() > deadline:
            instead = f"; instead: {seen()}" if seen is not None else ""
            raise AssertionError(f"timed out waiting for {message or what}{instead}")
        await pilot.pause(0.02)


def showing(pilot: Pilot[Any]) -> str:
    """The screen on top and the errors it shows: what a wait that timed out says."""
    screen = pilot.app.screen
    errors = [text(e) for e in screen.query(".error").results(Static) if e.display]
    return f"{type(screen).__name__} showing {[e for e in errors if e] or 'no error'}"


def plain(widget: Widget) -> str:
    """What a widget shows, as text."""
    console = Console(width=widget.size.width or 120, record=True, file=io.StringIO())
    console.print(widget.render())
    return console.export_text()


async def main_screen(pilot: Pilot[Any]) -> MainScreen:
    """The main screen once the queue, the GPUs and the machine have been heard from."""
    await until(pilot, lambda: isinstance(pilot.app.screen, MainScreen), message="main screen")
    screen = pilot.app.screen
    assert isinstance(screen, MainScreen)
    await until(pilot, lambda: screen.settled, message="the first data")
    return screen


async def screen_of(pilot: Pilot[Any], kind: type[S]) -> S:
    screen = await until(pilot, lambda: isinstance(pilot.app.screen, kind) and pilot.app.screen,
                         message=kind.__name__)  # fmt: skip
    assert isinstance(screen, kind)
    return screen


STATES = ("idle", "head", "backfill", "preemption")


def app_for(state: str) -> AstraeusApp:
    fake = FakeClient(state)
    return AstraeusApp(fake, clock=fake.clock)


async def settled(pilot: Pilot[Any]) -> None:
    await main_screen(pilot)
    await pilot.pause()


PROJECT = Path("/tmp/ft-lowprio")  # where the New run form is opened: the same everywhere


async def new_run_filled(pilot: Pilot[Any]) -> None:
    """The New run form as the guide fills it: the JSON shown, More options open."""
    await settled(pilot)
    await pilot.press("n")
    # each key waits only for an idle moment: under load the form may not be up yet, and
    # the letters would go to the main screen's keys (t, l, o, p, w)
    form = await screen_of(pilot, SubmitScreen)
    await until(pilot, lambda: form.focused is form.query_one("#name"), message="Name focused")
    await pilot.press(*"ft-lowprio", "tab", *"trainer:1", "tab", *"bash", "tab", *"8")
    await pilot.press("tab", *"checkpoints:/ckpt")
    await pilot.click("#edit-json")
    await until(pilot, lambda: form.focused is form.query_one("#json"), message="the JSON")
    await pilot.press("escape", "enter")  # out of the JSON to More options, opened
    await until(pilot, lambda: not form.query_one("#more", Collapsible).collapsed,
                message="More options open")  # fmt: skip
    await pilot.press("tab", *"-100", "tab", *"48h")
    await still(pilot)
    # where the JSON and the form are scrolled depends on the order the fields' rewrites of
    # the JSON and the layout met in (a loaded machine drew the JSON one line off): both
    # are put where the picture wants them, the JSON at its top, the form at its end
    form = pilot.app.screen
    form.query_one("#json", TextArea).scroll_home(animate=False)
    form.query_one("#fields", VerticalScroll).scroll_end(animate=False)
    await still(pilot)


async def still(pilot: Pilot[Any], tries: int = 50) -> None:
    """Until the screen stops moving: each field focused scrolls the form, and the JSON
    rewritten scrolls its box, as animations; a machine under load was drawn halfway
    through one (a form one line off its snapshot)."""
    await pilot.wait_for_scheduled_animations()
    before = pilot.app.export_screenshot()
    for _ in range(tries):
        await pilot.pause(0.05)
        await pilot.wait_for_animation()
        now = pilot.app.export_screenshot()
        if now == before:
            return
        before = now
    raise AssertionError(f"the screen still moves after {tries} looks")


Scenario = Callable[[Pilot[Any], MainScreen, Client], Coroutine[Any, Any, None]]


def drive(
    served: Callable[..., Served], scenario: Scenario, *runs: dict[str, Any],
    config: str = WORKSPACES, machine: str = "", grace: float = 1, gpus: int = 4,
) -> None:  # fmt: skip
    daemon = served(config, gpus=gpus, grace=grace, machine=machine)
    client = Client(daemon.socket)
    for document in runs:
        client.submit(document)

    async def main() -> None:
        app = AstraeusApp(AsyncClient(daemon.socket))
        async with app.run_test(size=(120, 36)) as pilot:
            await scenario(pilot, await main_screen(pilot), client)

    try:
        asyncio.run(main())
    finally:
        stop_now(daemon)


def stop_now(daemon: Served) -> None:
    """SIGKILL: the daemon's SIGTERM waits on a change stream whose client has gone.

    (``runner/api_streams.sse`` notices a closed connection only when it next
    writes, up to 15 s later; ``Served.stop`` gives up after 10 s.)
    """
    if daemon.proc is not None and daemon.proc.poll() is None:
        daemon.proc.kill()
        daemon.proc.wait()


def text(widget: Static) -> str:
    return str(widget.render())


async def highlight(pilot: Pilot[Any], screen: MainScreen, name: str) -> None:
    table = screen.query_one(QueueTable)
    await until(pilot, lambda: table.select(name), message=f"{name} in the table")
    await until(pilot, lambda: table.selected_key == name)


# what a test does to the dashboard on recorded answers (``replay``)
Replayed = Callable[[Pilot[Any], MainScreen, FakeClient], Coroutine[Any, Any, None]]


class Clock:
    """A clock that stands still until the test moves it (``now``)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def replay(state: str, scenario: Replayed, clock: Clock | None = None) -> None:
    """``scenario`` played on the dashboard against the recorded answers of ``state``."""
    fake = FakeClient(state)

    async def main() -> None:
        app = AstraeusApp(fake, clock=clock or fake.clock)
        async with app.run_test(size=(120, 36)) as pilot:
            await scenario(pilot, await main_screen(pilot), fake)

    asyncio.run(main())


def cell(table: QueueTable, rid: str, column: str) -> str:
    """What the queue shows in ``column`` of run ``rid``'s row."""
    return str(table.get_cell(rid, column))
