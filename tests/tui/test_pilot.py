"""The dashboard against a real daemon (process executor, simulated GPUs).

Each test drives the app as a person would (keys, the form) and checks both
what the screen shows and what the daemon now holds.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Button, DataTable, Input, Log, Select, Static

from astraeus_tui.client import Client
from astraeus_tui.screens.detail import RunDetailScreen
from astraeus_tui.screens.dialogs import ConfirmScreen, PriorityScreen
from astraeus_tui.screens.main import MainScreen
from astraeus_tui.screens.submit import SubmitScreen
from astraeus_tui.when import start_label
from astraeus_tui.widgets.queue_table import QueueTable
from tests.support.harness import sleeper, spec
from tests.support.served import Served
from tests.tui.helpers import WORKSPACES, drive, highlight, screen_of, text, until
from tests.tui.record_fixtures import slow_stop


def test_submit_from_the_form(served: Callable[..., Served]) -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        await pilot.press("n")
        form = await screen_of(pilot, SubmitScreen)
        form.query_one("#name", Input).value = "from-form"
        form.query_one("#command", Input).value = shlex.join(sleeper())
        form.query_one("#gpus", Input).value = "2"
        form.query_one("#limit", Input).focus()
        await pilot.press(*"an hour")
        await pilot.click("#submit")
        error = form.query_one("#error-limit", Static)
        await until(pilot, lambda: error.display and "is not a duration" in text(error))
        form.query_one("#limit", Input).value = "1h"
        button = form.query_one("#submit", Button)  # a button ignores clicks while it flashes
        await until(pilot, lambda: not button.has_class("-active"), message="the button")
        await pilot.click("#submit")
        await until(pilot, lambda: "from-form" in screen.model.runs, message="the new run")
        assert pilot.app.screen is screen
        run = client.show("from-form")
        assert (run.gpus_requested, run.time_limit_seconds) == (2, 3600)
        await until(pilot, lambda: screen.query_one(QueueTable).selected_key == "from-form")

    drive(served, scenario)


def test_the_form_says_the_default_workspaces_maximum_and_image(
    served: Callable[..., Served],
) -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        await pilot.press("n")
        form = await screen_of(pilot, SubmitScreen)
        hint, image = form.query_one("#priority-hint", Static), form.query_one("#image", Input)
        await until(pilot, lambda: text(hint).endswith("Up to 10 here."), message="vision's cap")
        assert image.value == "trainer:1"  # the machine's default image
        form.query_one("#workspace", Select).value = "nlp"
        await until(pilot, lambda: text(hint).endswith("Up to 0 here."), message="nlp's cap")
        assert image.value == "nlp-image:2"  # the workspace's own default
        image.value = "mine:3"
        form.query_one("#workspace", Select).value = "vision"
        await until(pilot, lambda: text(hint).endswith("Up to 10 here."), message="vision again")
        assert image.value == "mine:3"  # what the person typed stays

    config = WORKSPACES + 'default_image = "nlp-image:2"\n'  # in [workspaces.nlp], the last
    drive(served, scenario, config=config, machine='default_image = "trainer:1"')


def test_submit_a_spec_file(served: Callable[..., Served], tmp_path: Path) -> None:
    document = spec("from-file", sleeper(), gpus=1, priority=50, workspace="vision")
    path = tmp_path / "run.json"
    path.write_text(json.dumps(document))

    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        await pilot.press("n")
        form = await screen_of(pilot, SubmitScreen)
        form.query_one("#file", Input).value = str(path)
        await pilot.click("#submit-file")
        error = form.query_one("#error-file", Static)
        expected = "403 PRIORITY_NOT_ALLOWED: priority 50 is above namespace vision's maximum of 10"
        await until(pilot, lambda: text(error) == expected, message="the 403 at the file")
        path.write_text(json.dumps(dict(document, spec=dict(document["spec"], priority=3))))
        button = form.query_one("#submit-file", Button)
        await until(pilot, lambda: not button.has_class("-active"), message="the button")
        await pilot.click("#submit-file")
        await until(pilot, lambda: "from-file" in screen.model.runs, message="the new run")
        assert client.show("from-file").priority == 3

    drive(served, scenario)


def test_a_name_in_use_is_shown_at_the_name(served: Callable[..., Served]) -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        await pilot.press("n")
        form = await screen_of(pilot, SubmitScreen)
        form.query_one("#name", Input).value = "taken"
        form.query_one("#command", Input).value = shlex.join(sleeper())
        await pilot.click("#submit")
        error = form.query_one("#error-name", Static)
        await until(pilot, lambda: "409 NAME_IN_USE" in text(error), message="the 409")

    drive(served, scenario, spec("taken", sleeper()))


def test_reprioritise_and_the_403_as_the_daemon_says_it(served: Callable[..., Served]) -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        await highlight(pilot, screen, "job")
        await pilot.press("p")
        dialog = await screen_of(pilot, PriorityScreen)
        hint = "Higher runs first and may preempt lower. Up to 10 here."
        assert hint in text(dialog.query_one(".hint", Static))
        dialog.query_one(Input).value = "50"
        await pilot.press("enter")
        error = dialog.query_one("#error", Static)
        expected = "403 PRIORITY_NOT_ALLOWED: priority 50 is above namespace vision's maximum of 10"
        await until(pilot, lambda: text(error) == expected, message="the 403")
        assert client.show("job").priority == 0
        dialog.query_one(Input).value = "7"
        await pilot.press("enter")
        await until(pilot, lambda: pilot.app.screen is screen, message="the dialog to close")
        await until(pilot, lambda: screen.model.runs["job"].priority == 7, message="prio 7")
        assert client.show("job").priority == 7

    drive(served, scenario, spec("job", sleeper(), gpus=1, workspace="vision"))


def test_delete_asks_first(served: Callable[..., Served]) -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        await highlight(pilot, screen, "doomed")
        await pilot.press("d")
        await screen_of(pilot, ConfirmScreen)
        await pilot.press("n")
        await until(pilot, lambda: pilot.app.screen is screen)
        assert client.show("doomed").state in ("Starting", "Running")
        await pilot.press("d")
        await screen_of(pilot, ConfirmScreen)
        await pilot.press("y")
        await until(pilot, lambda: "doomed" not in screen.model.runs, message="the delete")
        assert "doomed" not in screen.query_one(QueueTable).rows
        assert client.show("doomed").state == "Cancelled"

    drive(served, scenario, spec("doomed", sleeper(), gpus=1))


def test_filter_by_workspace_state_and_search(served: Callable[..., Served]) -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        table = screen.query_one(QueueTable)
        await until(pilot, lambda: table.row_count == 3, message="three runs")
        await pilot.press("w")  # the first workspace by name: nlp
        await until(pilot, lambda: set(table.rows) == {"talk"})
        await pilot.press("w")  # vision
        await until(pilot, lambda: set(table.rows) == {"see", "wait"})
        await pilot.press("t")  # and Queued
        await until(pilot, lambda: set(table.rows) == {"wait"})
        await pilot.press("w", "t", "t", "t", "t")  # all workspaces, all states
        await until(pilot, lambda: table.row_count == 3)
        # on the way no run was Starting: the table, hidden, lost the focus; shown again it
        # has it back, and the arrows move its cursor (the controls act on that row)
        assert screen.focused is table
        at = table.cursor_row
        await pilot.press("down")
        await until(pilot, lambda: table.cursor_row == at + 1, message="the cursor moved")
        await pilot.press("slash")
        await pilot.press(*"tal")
        await until(pilot, lambda: set(table.rows) == {"talk"})
        await pilot.press("escape")
        await until(pilot, lambda: table.row_count == 3)

    drive(served, scenario, spec("see", sleeper(), gpus=4, limit=600, workspace="vision"),
          spec("talk", sleeper(), workspace="nlp"),
          spec("wait", sleeper(), gpus=2, workspace="vision"))  # fmt: skip


def test_the_detail_screen_and_its_log(served: Callable[..., Served]) -> None:
    talker = ["/bin/sh", "-c", "echo hello from the run; exec sleep 600"]

    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        await highlight(pilot, screen, "talker")
        await pilot.press("enter")
        detail = await screen_of(pilot, RunDetailScreen)
        log = detail.query_one(Log)
        await until(pilot, lambda: "hello from the run" in "\n".join(log.lines), message="log")
        await until(pilot, lambda: detail.run is not None)
        events = text(detail.query_one("#events", Static))
        assert "Submitted" in events and "Started" in events
        await pilot.press("escape")
        await until(pilot, lambda: pilot.app.screen is screen)

    drive(served, scenario, spec("talker", talker, gpus=1))


def test_a_paused_run_says_so(served: Callable[..., Served]) -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        await until(pilot, lambda: client.show("low").state == "Running", message="low runs")
        client.submit(spec("urgent", sleeper(), gpus=4, priority=10, workspace="vision"))
        await until(
            pilot, lambda: getattr(screen.model.runs.get("low"), "paused", None), message="pause"
        )
        await highlight(pilot, screen, "low")
        await pilot.press("enter")
        detail = await screen_of(pilot, RunDetailScreen)
        headline = detail.query_one("#headline", Static)
        paused = "Paused to make room for higher-priority work"
        await until(pilot, lambda: text(headline).startswith(paused), message="the headline")

    drive(served, scenario, spec("low", sleeper(), gpus=4, priority=-5, workspace="vision"))


def test_the_run_page_says_which_independent_worker_is_stopping(
    served: Callable[..., Served],
) -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        await until(pilot, lambda: client.show("pool").state == "Running", message="pool runs")
        await until(pilot, lambda: client.show("big").state == "Running", message="big runs")
        client.submit(spec("urgent", sleeper(), gpus=1, priority=10, workspace="vision"))
        await highlight(pilot, screen, "pool")
        await pilot.press("enter")
        detail = await screen_of(pilot, RunDetailScreen)
        history = detail.query_one("#history", DataTable)

        def workers() -> list[tuple[str, str]]:  # (state, why) of attempt 1's workers
            rows = [[str(c) for c in history.get_row_at(i)] for i in range(history.row_count)]
            return sorted((row[2], row[7]) for row in rows if row[0] == "1")

        stopping = [("Running", ""), ("Stopping", "preempted by urgent")]
        await until(pilot, lambda: workers() == stopping, message="one worker stopping")
        headline = text(detail.query_one("#headline", Static))
        assert headline == "1 of 2 workers stopping (preempted by urgent)"
        assert client.show("pool").state == "Running"

    pool = spec("pool", slow_stop(20), gpus=1, workers=2, gang=False, workspace="nlp")
    big = spec("big", sleeper(), gpus=2, priority=5, workspace="vision")
    drive(served, scenario, pool, big, grace=30)


def test_the_run_page_says_why_it_waits_and_what_would_help(served: Callable[..., Served]) -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        await until(pilot, lambda: client.show("big").state == "Running", message="big runs")
        await highlight(pilot, screen, "waiter")
        await pilot.press("enter")
        detail = await screen_of(pilot, RunDetailScreen)
        why = detail.query_one("#why", Static)
        lever = "→ With 1 GPU(s) per worker instead of 2 it starts now."
        await until(pilot, lambda: why.display and lever in text(why), message="the lever")
        shown = text(why)
        assert shown.startswith("Why it waits")
        # no run has finished here: the forecast says so before the limits' estimate
        assert "Estimate: likely start: no history yet (0 of 5 finished runs); starts by " in shown
        assert client.show("waiter").state == "Queued"

    drive(served, scenario, spec("big", sleeper(), gpus=3, limit=600, workspace="vision"),
          spec("waiter", sleeper(), gpus=2, workspace="vision"))  # fmt: skip


def test_preview_from_the_form_submits_nothing(served: Callable[..., Served]) -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        await until(pilot, lambda: client.show("big").state == "Running", message="big runs")
        await pilot.press("n")
        form = await screen_of(pilot, SubmitScreen)
        form.query_one("#name", Input).value = "what-if"
        form.query_one("#command", Input).value = shlex.join(sleeper())
        form.query_one("#gpus", Input).value = "2"
        await pilot.click("#preview")
        answer = form.query_one("#preview-answer", Static)
        await until(pilot, lambda: answer.display and "Would wait: " in text(answer),
                    message="the preview")  # fmt: skip
        shown = text(answer)
        assert "position 1 of 1" in shown and "Nothing was submitted." in shown
        form.query_one("#priority", Input).value = "50"
        await pilot.press("ctrl+r")
        error = form.query_one("#error-priority", Static)
        expected = "403 PRIORITY_NOT_ALLOWED: priority 50 is above namespace vision's maximum of 10"
        await until(pilot, lambda: text(error) == expected, message="the 403")
        assert not answer.display
        assert pilot.app.screen is form
        assert [r.name for r in client.runs(all=True)] == ["big"]

    drive(served, scenario, spec("big", sleeper(), gpus=3, limit=600, workspace="vision"))


def start_cell(screen: MainScreen, name: str) -> str:
    table = screen.query_one(QueueTable)
    return str(table.get_cell(name, "start")) if name in table.rows else ""


def listed_start(client: Client, name: str) -> str:
    """The run's START as `astra ls` shows it, from the daemon's listing."""
    run = next(r for r in client.runs() if r.name == name)
    return start_label(run, time.time())


def test_the_heads_start_is_its_shadow_time(served: Callable[..., Served]) -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        await until(pilot, lambda: client.show("big").state == "Running", message="big runs")
        await until(pilot, lambda: client.show("waiter").head, message="the head")
        expected = listed_start(client, "waiter")
        assert expected not in ("", "?")
        await until(pilot, lambda: start_cell(screen, "waiter") == expected, message=expected)
        assert start_cell(screen, "big") == ""

    drive(served, scenario, spec("big", sleeper(), gpus=3, limit=600, workspace="vision"),
          spec("waiter", sleeper(), gpus=2, limit=600, workspace="vision"))  # fmt: skip


def test_no_start_is_invented_when_running_work_has_no_limit(served: Callable[..., Served]) -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        await until(pilot, lambda: client.show("big").state == "Running", message="big runs")
        await until(pilot, lambda: client.show("waiter").head, message="the head")
        assert listed_start(client, "waiter") == "?"
        await until(pilot, lambda: start_cell(screen, "waiter") == "?", message="?")

    drive(served, scenario, spec("big", sleeper(), gpus=3, workspace="vision"),
          spec("waiter", sleeper(), gpus=2, limit=600, workspace="vision"))  # fmt: skip


def test_every_waiting_runs_start_is_the_daemons_estimate(served: Callable[..., Served]) -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        await until(pilot, lambda: client.show("big").state == "Running", message="big runs")
        await until(pilot, lambda: client.show("waiter").head, message="the head")
        listed = lambda: {name: listed_start(client, name) for name in ("waiter", "next")}  # noqa: E731
        expected = await until(pilot, lambda: "?" not in listed().values() and listed(),
                               message="the estimates")  # fmt: skip
        shown = lambda: {name: start_cell(screen, name) for name in expected}  # noqa: E731
        await until(pilot, lambda: shown() == expected, timeout=5, message=f"{expected}")

    drive(served, scenario, spec("big", sleeper(), gpus=3, limit=600, workspace="vision"),
          spec("waiter", sleeper(), gpus=2, limit=600, workspace="vision"),
          spec("next", sleeper(), gpus=4, limit=600, workspace="vision"))  # fmt: skip
