"""The New run form as the scheduling guide walks through it, key by key, against a
real daemon: the fields, Edit as JSON kept in step with them, More options, the
workspace's quota beside the form, and the queue's focus after Start run."""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Collapsible, Input, Static, TextArea

from astraeus_tui.client import Client
from astraeus_tui.screens.main import MainScreen
from astraeus_tui.screens.submit import SubmitScreen
from astraeus_tui.widgets.filter_bar import FilterBar
from astraeus_tui.widgets.queue_table import QueueTable
from astraeus_tui.widgets.workspaces_panel import WorkspacesPanel
from tests.support.harness import sleeper
from tests.support.served import Served
from tests.tui.helpers import (
    WORKSPACES,
    app_for,
    drive,
    plain,
    screen_of,
    settled,
    showing,
    text,
    until,
)

IMAGE = "nvcr.io/nvidia/pytorch:24.08-py3"
ARGS = ["-c", "exec torchrun --nproc-per-node=$ASTRAEUS_GPU_COUNT /ckpt/code/train.py"]


async def type_in(pilot: Pilot[Any], words: str) -> None:
    await pilot.press(*words)


def json_of(form: SubmitScreen) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(form.query_one("#json", TextArea).text)
    return loaded


async def cursor_after(pilot: Pilot[Any], area: TextArea, marker: str) -> None:
    """Put the JSON's cursor just after the first ``marker`` (as arrow keys would)."""
    for row, line in enumerate(area.text.splitlines()):
        if marker in line:
            area.move_cursor((row, line.index(marker) + len(marker)))
            await pilot.pause()
            return
    raise AssertionError(f"{marker!r} not in the JSON:\n{area.text}")


def test_the_guides_new_run_walk_through(served: Callable[..., Served], tmp_path: Path) -> None:
    drive_dir = tmp_path / "drive"
    drive_dir.mkdir()
    config = WORKSPACES + f'\n[drives.checkpoints]\npath = "{drive_dir}"\n'

    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        await pilot.press("n")
        form = await screen_of(pilot, SubmitScreen)
        quota = form.query_one("#quota", Static)
        assert "Max priority 10" in text(quota) and "0 / 8" in text(quota)  # vision's
        # 1. Name ft-lowprio, Image, Command bash, then Edit as JSON to set args.
        await type_in(pilot, "ft-lowprio")
        await pilot.press("tab")
        await type_in(pilot, IMAGE)  # the field's default image is selected: typing replaces it
        await pilot.press("tab")
        await type_in(pilot, "bash")
        await pilot.click("#edit-json")
        area = form.query_one("#json", TextArea)
        await until(pilot, lambda: area.has_focus, message="the JSON, focused")
        shown = json_of(form)
        assert shown["metadata"]["name"] == "ft-lowprio"
        task = shown["spec"]["task_template"]
        assert (task["image"], task["command"], task["args"]) == (IMAGE, "bash", [])
        await cursor_after(pilot, area, '"args": [')
        await type_in(pilot, ", ".join(json.dumps(a) for a in ARGS)[:-1])
        error = form.query_one("#error-json", Static)  # not JSON yet: the quote is open
        await until(pilot, lambda: error.display and text(error).startswith("JSON: "))
        assert "\n" not in text(error)
        await pilot.press('"')
        await until(pilot, lambda: not error.display, message="the JSON whole again")
        command = form.query_one("#command", Input)
        await until(pilot, lambda: command.value.startswith("bash -c 'exec torchrun"))
        # 2. GPUs 8, Drives checkpoints:/ckpt.
        await pilot.click("#gpus")
        await type_in(pilot, "8")
        await pilot.click("#drives")
        await type_in(pilot, "checkpoints:/ckpt")
        await until(pilot, lambda: json_of(form)["spec"]["task_template"]["datavolume_refs"])
        task = json_of(form)["spec"]["task_template"]
        assert task["requested_resources"]["gpu_requests"]["count"] == 8
        assert task["args"] == ARGS  # what only the JSON said stays
        # 3. More options: Priority -100, Time limit 48h.
        more = form.query_one("#more", Collapsible)
        assert more.collapsed
        await pilot.click("#more CollapsibleTitle")
        await until(pilot, lambda: not more.collapsed, message="More options open")
        hint = form.query_one("#priority-hint", Static)
        assert text(hint) == "Higher runs first and may preempt lower. Up to 10 here."
        await pilot.press("tab")  # from the More options title
        assert pilot.app.focused is form.query_one("#priority", Input)
        await type_in(pilot, "-100")
        await pilot.press("tab")
        assert pilot.app.focused is form.query_one("#limit", Input)
        await type_in(pilot, "48h")
        await until(pilot, lambda: json_of(form)["spec"]["priority"] == -100)
        # 4. Start run.
        await pilot.click("#submit")
        await until(pilot, lambda: "ft-lowprio" in screen.model.runs, message="the new run")
        assert pilot.app.screen is screen
        stored = client.show("ft-lowprio").spec["spec"]
        assert stored["priority"] == -100
        task = stored["task_template"]
        assert (task["image"], task["command"], task["args"]) == (IMAGE, "bash", ARGS)
        assert task["time_limit_seconds"] == 172800
        assert task["requested_resources"]["gpu_requests"]["count"] == 8
        assert [(d["name"], d["mount_path"]) for d in task["datavolume_refs"]] == [
            ("checkpoints", "/ckpt")
        ]
        # the next key is the queue's: "/" opens Find from the queue, a letter filters nothing
        table = screen.query_one(QueueTable)
        await until(pilot, lambda: pilot.app.focused is table, message="the queue focused")
        await pilot.press("j")
        assert not screen.query_one(FilterBar).has_focus_within

    drive(served, scenario, config=config, gpus=8)


def test_refused_json_is_said_in_one_line_and_kept(served: Callable[..., Served]) -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        await pilot.press("n")
        form = await screen_of(pilot, SubmitScreen)
        await type_in(pilot, "by-json")
        form.query_one("#command", Input).value = "true"
        await pilot.click("#edit-json")
        area = form.query_one("#json", TextArea)
        await until(pilot, lambda: area.has_focus, message="the JSON, focused")
        await cursor_after(pilot, area, '"task_template": {')
        await type_in(pilot, '"env": {"1X": "y"},')
        error = form.query_one("#error-json", Static)
        await pilot.click("#submit")
        await until(pilot, lambda: error.display and "422 INVALID_SPEC" in text(error))
        assert "is not a variable name" in text(error) and "\n" not in text(error).strip()
        kept = area.text
        assert '"1X"' in kept and pilot.app.screen is form
        form.query_one("#name", Input).value = "by-json-2"  # a field typed in: JSON follows
        await until(pilot, lambda: '"by-json-2"' in area.text, message="the name in the JSON")
        assert '"1X"' in area.text
        assert client.runs(all=True) == []

    drive(served, scenario)


def test_after_a_submit_the_queue_has_the_focus_wherever_it_was(
    served: Callable[..., Served],
) -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        await pilot.press("/")  # Find open and focused, then New run from the palette
        bar = screen.query_one(FilterBar)
        await until(pilot, lambda: bar.has_focus_within, message="the Find box")
        await pilot.app.run_action("screen.new_run")
        form = await screen_of(pilot, SubmitScreen)
        await until(pilot, lambda: form.query("#name"), message="the form")
        form.query_one("#name", Input).value = "after-find"
        # a run that stays in the queue: one that ends at once may end between two diffs
        form.query_one("#command", Input).value = shlex.join(sleeper())
        await pilot.click("#submit")
        await until(pilot, lambda: "after-find" in screen.model.runs, message="the new run")
        table = screen.query_one(QueueTable)
        await until(pilot, lambda: pilot.app.focused is table, message="the queue focused")
        await pilot.press("x")
        assert not bar.has_focus_within and "after-find" in table.rows

    drive(served, scenario)


def test_the_form_starts_a_run_where_the_dashboard_was_opened(
    served: Callable[..., Served], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Folder field says where the dashboard was opened, and a run from the form starts
    there with the dashboard's environment, as `astra run` does with its shell's (a run
    from the form could not find the project's python); a folder typed in is a --chdir."""
    for name in ("proj", "other"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "data.txt").write_text(f"data of {name}\n")
    monkeypatch.chdir(tmp_path / "proj")
    monkeypatch.setenv("ASTRA_FORM_MARK", "from the dashboard's shell")

    async def submit(
        pilot: Pilot[Any], screen: MainScreen, name: str, folder: str, command: str = "cat data.txt"
    ) -> None:
        await pilot.press("n")
        form = await screen_of(pilot, SubmitScreen)
        field = form.query_one("#folder", Input)
        await until(pilot, lambda: field.value == str(tmp_path / "proj"), message="the folder")
        form.query_one("#name", Input).value = name
        form.query_one("#command", Input).value = command
        field.value = folder
        assert await pilot.click("#submit"), "the click missed Start run"
        # the form closes once the daemon took the run (the next "n" is for the main
        # screen, not typed into this form). Not waited for in the queue: `cat` may end
        # before the dashboard's next diff of the active runs, and never be in it
        await until(pilot, lambda: pilot.app.screen is screen, message=f"{name} taken",
                    seen=lambda: showing(pilot))  # fmt: skip

    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        await submit(pilot, screen, "here", str(tmp_path / "proj"))  # as it was filled in
        await submit(pilot, screen, "there", str(tmp_path / "other"))
        await submit(
            pilot, screen, "marked", str(tmp_path / "proj"), 'sh -c "echo $ASTRA_FORM_MARK"'
        )
        said = (("here", "data of proj\n"), ("there", "data of other\n"),
                ("marked", "from the dashboard's shell\n"))  # fmt: skip
        for name, data in said:
            await until(pilot, lambda: client.show(name).state == "Succeeded", message=name)  # noqa: B023
            assert b"".join(client.logs(name)).decode() == data
        assert client.show("here").spec["spec"]["task_template"]["submit_dir"] == str(
            tmp_path / "proj"
        )
        assert client.show("there").spec["spec"]["task_template"]["working_dir"] == str(
            tmp_path / "other"
        )

    drive(served, scenario)


@pytest.mark.parametrize(("width", "head"), [(120, "max\nprio"), (200, "Max priority")])
def test_the_workspaces_panel_says_max_priority_where_it_fits(width: int, head: str) -> None:
    async def main() -> None:
        app = app_for("head")
        async with app.run_test(size=(width, 36)) as pilot:
            await settled(pilot)
            panel = app.screen.query_one(WorkspacesPanel)
            assert panel.workspaces
            shown = plain(panel)
            assert ("Max priority" in shown) == (head == "Max priority")
            vision = next(line for line in shown.splitlines() if line.startswith("vision"))
            assert vision.rstrip().endswith("10")  # vision's maximum, under its heading

    asyncio.run(main())


def test_an_error_goes_once_its_field_is_changed() -> None:
    """What a field's error said was of the text it had: edited, the error is gone."""

    async def main() -> None:
        app = app_for("head")
        async with app.run_test(size=(120, 36)) as pilot:
            await settled(pilot)
            await pilot.press("n")
            form = await screen_of(pilot, SubmitScreen)
            form.query_one("#command", Input).value = "true"
            form.query_one("#limit", Input).value = "5m20"  # not a duration
            await pilot.press("ctrl+s")
            error = form.query_one("#error-limit", Static)
            await until(pilot, lambda: error.display, seen=lambda: showing(pilot))
            assert "not a duration" in text(error)
            form.query_one("#limit", Input).value = "5m"
            await until(pilot, lambda: not error.display, message="the limit's error gone")
            assert not form.query_one("#limit", Input).has_class("-invalid")

    asyncio.run(main())
