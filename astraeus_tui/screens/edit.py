"""The run page's edit dialog (`e`): time limit, GPUs, CPUs, memory and priority.

Only the fields changed are sent (``PATCH /v1/runs/{name}``, as `astra update`); the
daemon checks them as a submit is, and its refusal is shown in one line. A running run
may change only its time limit: the other fields are not offered.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from astraeus_tui.client import ApiError, DashboardApi
from astraeus_tui.text import plain
from astraeus_tui.widgets import SaysFaults
from runner.durations import parse_duration
from runner.model import RunState, format_size
from runner.schema import Run

FIELDS = (  # input id, label, what the API calls it
    ("time-limit", "Time limit", "time_limit_seconds"),
    ("gpus", "GPUs", "gpus"),
    ("cpus", "CPUs", "cpu_cores"),
    ("memory", "Memory", "memory"),
    ("priority", "Priority", "priority"),
)


def limit_text(seconds: int | None) -> str:
    """``5400`` -> ``90m``; ``None`` -> "" (no time limit)."""
    if not seconds:
        return ""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return str(seconds)


def current(run: Run) -> dict[str, str]:
    """The run's values as the form shows them."""
    return {
        "time-limit": limit_text(run.time_limit_seconds),
        "gpus": str(run.gpus_requested),
        "cpus": f"{run.cpu_cores_requested:g}",
        "memory": format_size(run.memory_requested) if run.memory_requested else "0",
        "priority": str(run.priority),
    }


def changes(run: Run, values: dict[str, str]) -> dict[str, Any]:
    """The PATCH body of the fields changed; ValueError (one line) for a bad value."""
    was, out = current(run), dict[str, Any]()
    for key, label, field in FIELDS:
        text = values.get(key, was[key]).strip()
        if text == was[key]:
            continue
        if key == "time-limit":
            out[field] = parse_duration(text) if text else None
        elif key in ("gpus", "priority"):
            try:
                out[field] = int(text)
            except ValueError:
                raise ValueError(f"{label}: {text!r} is not a whole number") from None
        elif key == "cpus":
            try:
                out[field] = float(text)
            except ValueError:
                raise ValueError(f"{label}: {text!r} is not a number of cores") from None
        else:
            out[field] = text
    return out


class EditRunScreen(SaysFaults, ModalScreen[bool]):
    """Dismissed with True once the daemon took the change, False when cancelled."""

    CSS_PATH: ClassVar[list[str | PurePath]] = ["dialogs.tcss", "edit.tcss"]
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    class Done(Message):
        pass

    class Refused(Message):
        def __init__(self, error: str) -> None:
            super().__init__()
            self.error = error

    def __init__(self, client: DashboardApi, run: Run) -> None:
        super().__init__()
        self.client, self.run = client, run
        self.running = run.state != RunState.QUEUED

    def compose(self) -> ComposeResult:
        values = current(self.run)
        with Vertical(classes="dialog") as box:
            box.border_title = f"Edit · {self.run.name}"
            if self.running:
                yield Label("It runs: only its time limit may change (shorter, unless admin).")
            for key, label, _ in FIELDS:
                if self.running and key != "time-limit":
                    continue
                with Horizontal(classes="field"):
                    yield Label(label, classes="name")
                    yield Input(values[key], id=key, compact=True)
            yield Static("Time limit: 2h, 90m, 1-00:00:00; empty for none.", classes="hint")
            yield Static("", id="error", classes="error")
            with Horizontal(classes="buttons"):
                yield Button("Cancel", id="cancel", compact=True)
                yield Button("Change", id="ok", variant="primary", compact=True)

    def on_mount(self) -> None:
        for box in self.query(Input):
            box.cursor_blink = False
        self.query(Input).first().focus()

    def action_cancel(self) -> None:
        self.dismiss(False)

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(False)

    @on(Button.Pressed, "#ok")
    @on(Input.Submitted)
    def _submit(self) -> None:
        values = {box.id or "": box.value for box in self.query(Input)}
        try:
            change = changes(self.run, values)
        except ValueError as e:
            self._error(str(e))
            return
        if not change:
            self.dismiss(False)
            return
        self._error("")
        self.send(change)

    def _error(self, text: str) -> None:
        error = self.query_one("#error", Static)
        error.update(plain(text.splitlines()[0] if text else ""))
        error.display = bool(text)

    @work(exclusive=True, group="edit", exit_on_error=False)
    async def send(self, change: dict[str, Any]) -> None:
        try:
            await self.client.update(self.run.name, change)
        except ApiError as e:
            self.post_message(self.Refused(str(e)))
            return
        self.post_message(self.Done())

    def on_edit_run_screen_done(self) -> None:
        self.app.notify(f"{self.run.name}: changed")
        self.dismiss(True)

    def on_edit_run_screen_refused(self, message: Refused) -> None:
        self._error(message.error)
