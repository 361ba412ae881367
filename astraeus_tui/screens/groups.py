"""Sweeps, replica groups and schedules: one table, the highlighted group's runs and events.

``GET /v1/groups`` every 2 s, and ``GET /v1/groups/{name}`` for the highlighted one.
Keys: ``+``/``-`` scale a replica group, ``space`` pauses or resumes a schedule,
``d`` deletes the group and its runs (asks first), ``escape`` goes back.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from astraeus_tui.client import ApiError, DashboardApi
from astraeus_tui.group_text import describe
from astraeus_tui.screens.detail import events_text
from astraeus_tui.text import plain
from astraeus_tui.widgets import Latest, SaysFaults
from runner.schema import Group, GroupDetail, UnsetType

REFRESH_EVERY = 2.0
COLUMNS = ("Kind", "Name", "WS", "Prio", "State")


class GroupsScreen(SaysFaults, Screen[None]):
    CSS_PATH = "groups.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "back", "Back", tooltip="Back to the queue"),
        Binding("plus", "scale(1)", "+1", key_display="+", tooltip="Add a replica"),
        Binding("minus", "scale(-1)", "-1", key_display="-", tooltip="Remove a replica"),
        Binding("space", "pause", "Pause", tooltip="Pause or resume the schedule"),
        Binding("d", "delete", "Delete", tooltip="Delete the group and its runs (asks first)"),
    ]

    class Loaded(Latest):
        def __init__(self, groups: list[Group], shown: GroupDetail | None) -> None:
            super().__init__()
            self.groups, self.shown = groups, shown

    def __init__(self, client: DashboardApi) -> None:
        super().__init__()
        self.client = client
        self.groups: list[Group] = []

    def compose(self) -> ComposeResult:
        yield Static(Text("Sweeps, replica groups and schedules", style="bold"), id="title")
        table: DataTable[Text] = DataTable(id="groups", cursor_type="row", zebra_stripes=True)
        table.border_title = "Groups"
        yield table
        with VerticalScroll(id="group-box") as box:
            box.border_title = "Runs and events"
            yield Static("", id="group")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns(*COLUMNS)
        self.load()

    @property
    def highlighted(self) -> Group | None:
        table: DataTable[Text] = self.query_one(DataTable)
        if not self.groups or table.cursor_row < 0 or table.cursor_row >= len(self.groups):
            return None
        return self.groups[table.cursor_row]

    @work(exclusive=True, group="groups", exit_on_error=False)
    async def load(self) -> None:
        while True:
            try:
                groups = await self.client.groups()
                current = self.highlighted
                name = current.name if current else (groups[0].name if groups else None)
                shown = None
                if name is not None and any(g.name == name for g in groups):
                    shown = await self.client.group(name)
                self.post_message(self.Loaded(groups, shown))
            except ApiError as e:
                self.notify(str(e), severity="error")
            await asyncio.sleep(REFRESH_EVERY)

    def on_groups_screen_loaded(self, message: Loaded) -> None:
        table: DataTable[Text] = self.query_one(DataTable)
        row = table.cursor_row
        self.groups = message.groups
        table.clear()  # tens of groups, not thousands: rebuilt each time
        for g in self.groups:
            cells = (g.kind, g.name, g.workspace, str(g.priority), describe(g))
            table.add_row(*(plain(c) for c in cells))  # a parameter's "[x]" is not markup
        if self.groups:
            table.move_cursor(row=min(max(row, 0), len(self.groups) - 1))
        else:
            empty = "No groups yet: astra sweep submit, replicas create, schedule create."
            self.query_one("#group", Static).update(Text(empty, style="dim"))
        if message.shown is not None:
            self.query_one("#group", Static).update(group_text(message.shown))

    def on_data_table_row_highlighted(self) -> None:
        self.load()  # show the newly highlighted group now

    # ------------------------------------------------------------ actions

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_scale(self, step: int) -> None:
        g = self.highlighted
        if g is None or g.kind != "replicas" or isinstance(g.replicas, UnsetType):
            self.notify("Only a replica group scales.", severity="warning")
            return
        self.change(g.name, {"replicas": max(0, g.replicas + step)})

    def action_pause(self) -> None:
        g = self.highlighted
        if g is None or g.kind != "schedule":
            self.notify("Only a schedule pauses.", severity="warning")
            return
        self.change(g.name, {"paused": not g.paused})

    def action_delete(self) -> None:
        from astraeus_tui.screens.dialogs import ConfirmScreen

        g = self.highlighted
        if g is None:
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.delete(g.name)

        detail = f"Its {len(g.runs)} run(s) go with it: queued ones cancelled, live ones stopped."
        self.app.push_screen(
            ConfirmScreen(f"Delete {g.kind} {g.name}?", detail, "Delete"), confirmed
        )

    @work(group="change", exit_on_error=False)
    async def change(self, name: str, change: dict[str, Any]) -> None:
        try:
            g = await self.client.change_group(name, change)
            self.notify(f"{name}: {describe(g)}")
        except ApiError as e:
            self.notify(str(e), severity="error")
        self.load()

    @work(group="change", exit_on_error=False)
    async def delete(self, name: str) -> None:
        try:
            result = await self.client.delete_group(name)
            runs = ", ".join(f"{n} {what}" for what, n in sorted(result["runs"].items()))
            self.notify(f"{name}: deleted ({runs or 'no runs'})")
        except ApiError as e:
            self.notify(str(e), severity="error")
        self.load()


def group_text(g: GroupDetail) -> Text:
    """The group's runs (state and reason) and then its own events."""
    text = Text()
    text.append(f"{g.kind} {g.name}", style="bold")
    text.append(f" · {g.workspace} · owner {g.owner} · priority {g.priority}\n", style="dim")
    text.append(describe(g) + "\n\n")
    for r in g.run_objects or []:
        text.append(f"{r.name:<28} ", style="bold")
        text.append(f"{r.state:<10} ", style="cyan")
        text.append(str(r.reason or "") + "\n")
    text.append("\n")
    text.append_text(events_text(g.events or []))
    return text
