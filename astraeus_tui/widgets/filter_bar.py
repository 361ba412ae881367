"""Above the queue: how it is sorted and filtered, and the `/` search box."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Input, Static

from astraeus_tui.widgets import css_beside

SORT_LABELS = {"order": "planner order", "priority": "priority", "age": "age", "name": "name",
               "workspace": "workspace", "state": "state"}  # fmt: skip


class FilterBar(Horizontal):
    DEFAULT_CSS = css_beside(__file__)

    sort: reactive[str] = reactive("order")
    workspace: reactive[str | None] = reactive(None)
    state: reactive[str | None] = reactive(None)
    search: reactive[str] = reactive("")
    shown: reactive[int] = reactive(0)
    total: reactive[int] = reactive(0)

    class SearchChanged(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    class SearchDone(Message):
        """Enter or Escape in the search box: back to the table."""

    def compose(self) -> ComposeResult:
        yield Static(id="summary")
        yield Input(placeholder="search name, reason…", id="search")

    def on_mount(self) -> None:
        box = self.query_one("#search", Input)
        box.display, box.cursor_blink = False, False
        self._summarise()

    def open_search(self) -> None:
        box = self.query_one("#search", Input)
        box.display = True
        box.focus()

    def _summarise(self) -> None:
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f"{self.shown}", style="bold")
        if self.shown != self.total:
            text.append(f" of {self.total}", style="bold")
        text.append(" run" if self.total == 1 and self.shown == 1 else " runs", style="dim")
        text.append(" · sorted by ", style="dim")
        text.append(SORT_LABELS.get(self.sort, self.sort))
        for label, value in (("workspace", self.workspace), ("state", self.state)):
            if value is not None:
                text.append(f" · {label} ", style="dim").append(value, style="bold cyan")
        if self.search:
            text.append(" · search ", style="dim").append(repr(self.search), style="bold cyan")
        self.query_one("#summary", Static).update(text)

    def _refresh_summary(self) -> None:
        if self.is_mounted:
            self._summarise()

    watch_sort = watch_workspace = watch_state = _refresh_summary
    watch_search = watch_shown = watch_total = _refresh_summary

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.post_message(self.SearchChanged(event.value))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if not event.value:
            event.input.display = False
        self.post_message(self.SearchDone())

    def on_key(self, event: events.Key) -> None:
        box = self.query_one("#search", Input)
        if event.key == "escape" and box.has_focus:
            event.stop()
            box.value = ""
            box.display = False
            self.post_message(self.SearchDone())
