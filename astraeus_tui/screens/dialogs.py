"""Small dialogs: change a run's priority, confirm a deletion."""

from __future__ import annotations

from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from astraeus_tui.client import ApiError, DashboardApi
from astraeus_tui.fmt import Run
from astraeus_tui.text import plain
from astraeus_tui.widgets import SaysFaults

MIN_PRIORITY, MAX_PRIORITY = -1000, 1000


def priority_hint(limit: int | None) -> str:
    base = "Higher runs first and may preempt lower."
    return base if limit is None else f"{base} Up to {limit} here."


class PriorityScreen(SaysFaults, ModalScreen[int | None]):
    """Dismissed with the new priority, or None when cancelled."""

    CSS_PATH = "dialogs.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    class Changed(Message):
        def __init__(self, priority: int) -> None:
            super().__init__()
            self.priority = priority

    class Refused(Message):
        def __init__(self, error: str) -> None:
            super().__init__()
            self.error = error

    class Limit(Message):
        """The workspace's maximum priority, when the opener did not know it."""

        def __init__(self, limit: int) -> None:
            super().__init__()
            self.limit = limit

    def __init__(self, client: DashboardApi, run: Run, limit: int | None = None) -> None:
        super().__init__()
        self.client, self.run, self.limit = client, run, limit

    def compose(self) -> ComposeResult:
        run = self.run
        with Vertical(classes="dialog") as box:
            box.border_title = f"Priority · {run.name}"
            yield Label(f"Now {run.priority}, in workspace {run.workspace}.")
            yield Input(str(run.priority), id="priority", type="integer")
            yield Static(priority_hint(self.limit), classes="hint")
            yield Static("", id="error", classes="error")
            with Horizontal(classes="buttons"):
                yield Button("Cancel", id="cancel", compact=True)
                yield Button("Change", id="ok", variant="primary", compact=True)

    def on_mount(self) -> None:
        box = self.query_one(Input)
        box.cursor_blink = False
        box.focus()
        if self.limit is None:
            self.load_limit()

    @work(exclusive=True, group="limit", exit_on_error=False)
    async def load_limit(self) -> None:
        try:
            workspaces = await self.client.workspaces()
        except ApiError:
            return  # the hint stays without the number; the daemon still checks
        for ws in workspaces:
            if ws.get("name") == self.run.workspace:
                self.post_message(self.Limit(int(ws.get("max_priority", 0))))

    def on_priority_screen_limit(self, message: Limit) -> None:
        self.limit = message.limit
        self.query_one(".hint", Static).update(priority_hint(message.limit))

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#ok")
    @on(Input.Submitted)
    def _submit(self) -> None:
        text = self.query_one(Input).value.strip()
        try:
            value = int(text)
        except ValueError:
            self._error(f"{text!r} is not a whole number")
            return
        if not MIN_PRIORITY <= value <= MAX_PRIORITY:
            self._error(f"priority must be from {MIN_PRIORITY} to {MAX_PRIORITY}")
            return
        self._error("")
        self.change(value)

    def _error(self, text: str) -> None:
        error = self.query_one("#error", Static)
        error.update(plain(text))
        error.display = bool(text)
        self.query_one(Input).set_class(bool(text), "-invalid")

    @work(exclusive=True, group="priority", exit_on_error=False)
    async def change(self, value: int) -> None:
        try:
            await self.client.set_priority(self.run.name, value)
        except ApiError as e:
            self.post_message(self.Refused(str(e)))
            return
        self.post_message(self.Changed(value))

    def on_priority_screen_changed(self, message: Changed) -> None:
        self.app.notify(f"{self.run.name}: priority {message.priority}")
        self.dismiss(message.priority)

    def on_priority_screen_refused(self, message: Refused) -> None:
        self._error(message.error)


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no question; dismissed with True for yes."""

    CSS_PATH = "dialogs.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,n", "answer(False)", "No"),
        Binding("y", "answer(True)", "Yes"),
    ]

    def __init__(self, question: str, detail: str, verb: str = "Yes") -> None:
        super().__init__()
        self.question, self.detail, self.verb = question, detail, verb

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.question, classes="question")
            yield Static(self.detail, classes="hint")
            with Horizontal(classes="buttons"):
                yield Button("Cancel", id="no", compact=True)
                yield Button(self.verb, id="yes", variant="error", compact=True)

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")
