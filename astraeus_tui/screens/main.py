"""The main screen: the head, the queue, GPUs, preemption, timeline and workspaces.

Data flows one way: ``LiveFeed`` posts what the daemon says (messages up), the
screen merges it into ``QueueModel`` and hands each panel its part (attributes
down). Actions open dialogs; their I/O runs in workers that post ``Done``.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Static

from astraeus_tui.client import ApiError, DashboardApi
from astraeus_tui.fmt import Run
from astraeus_tui.queue_model import AGE_EVERY, SORTS, STATES, Diff, QueueModel
from astraeus_tui.widgets import SaysFaults
from astraeus_tui.widgets.filter_bar import FilterBar
from astraeus_tui.widgets.fitted_footer import FittedFooter
from astraeus_tui.widgets.gpu_panel import GpuPanel
from astraeus_tui.widgets.head_banner import HeadBanner
from astraeus_tui.widgets.header_bar import HeaderBar
from astraeus_tui.widgets.live_feed import LiveFeed
from astraeus_tui.widgets.preemption_panel import PreemptionPanel
from astraeus_tui.widgets.queue_table import QueueTable
from astraeus_tui.widgets.reason_line import ReasonLine
from astraeus_tui.widgets.timeline import QUEUED_ROWS, Timeline
from astraeus_tui.widgets.workspaces_panel import WorkspacesPanel
from runner.model import RunState

PANELS = ("gpus", "timeline", "workspaces")
FREEZE_AFTER = 1000
HEADER_SORTS = {"mark": "order", "name": "name", "workspace": "workspace", "priority": "priority",
                "state": "state", "age": "age", "start": "order", "reason": "order"}  # fmt: skip


class MainScreen(SaysFaults, Screen[None]):
    CSS_PATH = "main.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "new_run", "New", tooltip="New run: submit from a form or a spec file"),
        Binding("p", "priority", "Prio", tooltip="Change the highlighted run's priority"),
        Binding("d", "delete", "Del", tooltip="Delete the highlighted run (asks first)"),
        Binding("enter", "details", "Details", show=False, tooltip="Open the run's page"),
        Binding("l", "logs", "Logs", tooltip="Follow the highlighted run's logs"),
        Binding("o", "hold", "Hold", tooltip="Hold the highlighted queued run, or release it"),
        Binding("h", "head", "Head", tooltip="Jump to the queue head"),
        Binding("slash", "search", "Find", key_display="/", tooltip="Search the queue"),
        Binding("s", "sort", "Sort", tooltip="Sort the queue: cycle the order"),
        Binding("w", "workspace", "WS", tooltip="Filter by workspace: cycle"),
        Binding("t", "state", "State", tooltip="Filter by state: cycle"),
        Binding("v", "panel", "View", tooltip="Show the next bottom panel (narrow terminals)"),
        Binding(
            "g", "groups", "Groups", show=False, tooltip="Sweeps, replica groups and schedules"
        ),
        Binding("u", "usage", "Usage", show=False, tooltip="What each workspace used in 7 days"),
    ]

    class Done(Message):
        """An action finished: say how, in a toast."""

        def __init__(self, text: str, error: bool = False) -> None:
            super().__init__()
            self.text, self.error = text, error

    def __init__(self, client: DashboardApi, clock: Callable[[], float]) -> None:
        super().__init__()
        self.client, self.clock = client, clock
        self.model = QueueModel()
        self.workspaces: list[dict[str, Any]] = []
        self.status: dict[str, Any] = {}
        self.gpus_seen = False
        self._ticks = 0

    def compose(self) -> ComposeResult:
        yield HeaderBar()
        yield HeadBanner()
        yield FilterBar()
        yield QueueTable(id="queue")
        yield Static("", id="empty")
        yield ReasonLine()
        yield PreemptionPanel()
        with Horizontal(id="panels", classes="show-gpus"):
            yield GpuPanel(id="gpus")
            yield Timeline(id="timeline")
            yield WorkspacesPanel(id="workspaces")
        yield FittedFooter()
        yield LiveFeed(self.client, self.clock)

    def on_mount(self) -> None:
        self.query_one(QueueTable).focus()
        self.tick()
        self.set_interval(1.0, self.tick)

    @property
    def ready(self) -> bool:
        """The queue, the GPUs and the machine have all been heard from once."""
        return self.model.loaded and self.gpus_seen and bool(self.status)

    @property
    def settled(self) -> bool:
        """Ready, and every started run looked up (backfilled or not)."""
        return self.ready and self.query_one(LiveFeed).idle

    # ------------------------------------------------------------ data in

    def on_live_feed_runs_changed(self) -> None:
        feed = self.query_one(LiveFeed)
        diff = self.model.apply(feed.drain())
        self.show_queue(diff)
        if len(diff.added) >= FREEZE_AFTER:
            # Thousands of rows are long-lived: keep them out of the cyclic collector's
            # full passes, which otherwise stall the screen for 100 ms or more.
            gc.freeze()
        starts = self.model.starts_to_check(diff)
        if starts:
            feed.look_up_starts(starts)

    def on_live_feed_started(self, message: LiveFeed.Started) -> None:
        if self.model.mark_started(message.run_id, message.started_at, message.backfilled):
            self.show_queue(Diff(changed={message.run_id}))

    def on_live_feed_gpus(self, message: LiveFeed.Gpus) -> None:
        rows = message.gpus.gpus or []
        self.gpus_seen = True
        self.query_one(GpuPanel).gpus = message.gpus
        self.query_one(HeaderBar).gpus = len(rows)
        self.query_one(Timeline).free_gpus = sum(1 for g in rows if not g.holder)

    def on_live_feed_sampled(self, message: LiveFeed.Sampled) -> None:
        self.query_one(GpuPanel).telemetry = message.telemetry

    def on_live_feed_machine(self, message: LiveFeed.Machine) -> None:
        self.status, self.workspaces = message.status, message.workspaces
        self.query_one(HeaderBar).status = message.status
        drained = (message.status.get("drain") or {}).get("machine") or {}
        self.query_one(HeadBanner).draining = str(drained.get("reason", ""))
        self.query_one(WorkspacesPanel).workspaces = message.workspaces
        self.query_one(PreemptionPanel).grace = float(message.status.get("stop_grace_seconds", 30))

    def on_live_feed_connection(self, message: LiveFeed.Connection) -> None:
        header = self.query_one(HeaderBar)
        if header.connected and not message.connected:
            self.notify(message.error, title="Daemon", severity="error")
        header.connected, header.error = message.connected, message.error

    def show_queue(self, diff: Diff) -> None:
        """Merge a diff into the table and hand each panel its part."""
        model, now = self.model, self.clock()
        order = model.view()
        self.query_one(QueueTable).merge(order, diff.changed, lambda rid: model.cells(rid, now))
        bar = self.query_one(FilterBar)
        bar.shown, bar.total = len(order), len(model.runs)
        self._empty(len(order), len(model.runs))
        head = model.head
        banner = self.query_one(HeadBanner)
        banner.loaded, banner.head = model.loaded, head
        panel = self.query_one(PreemptionPanel)
        panel.received = model.received
        panel.victims = model.victims()
        lefts = [x for x in map(panel.left, panel.victims) if x is not None]
        banner.stop_left = max(lefts) if lefts else None
        timeline = self.query_one(Timeline)
        timeline.backfilled = frozenset(model.backfilled)
        timeline.head = head
        timeline.running = model.active()
        timeline.queued, timeline.waiting = model.waiting(QUEUED_ROWS, order), model.queued
        self._highlighted()

    def _empty(self, shown: int, total: int) -> None:
        empty = self.query_one("#empty", Static)
        empty.display = self.model.loaded and not shown
        table = self.query_one(QueueTable)
        hidden, table.display = not table.display, not empty.display
        if hidden and table.display and self.focused is None:
            table.focus()  # hidden, it lost the focus: the keys are the queue's again
        if total:
            empty.update("No run matches the filters: w, t and / change them.")
        else:
            empty.update("No runs wait or run. Press n to submit one (or: astra run -- CMD).")

    def tick(self) -> None:
        now = self.clock()
        self.query_one(HeaderBar).now = now
        self.query_one(HeadBanner).now = now
        self.query_one(Timeline).now = now
        panel = self.query_one(PreemptionPanel)
        panel.now = now
        if panel.victims:
            lefts = [x for x in map(panel.left, panel.victims) if x is not None]
            self.query_one(HeadBanner).stop_left = max(lefts) if lefts else None
        self._ticks += 1
        model, table = self.model, self.query_one(QueueTable)
        if self._ticks % int(AGE_EVERY) == 0:
            table.update_column("age", lambda rid: model.age_cell(rid, now))
            if model.idle():  # an idle run's "idle 25m" moves on
                table.update_column("reason", lambda rid: model.reason_cell(rid, now))
        if model.new_day(now):
            table.update_column("start", lambda rid: model.start_cell(rid, now))

    # ------------------------------------------------------------ the table

    @on(QueueTable.RowHighlighted)
    def _highlighted(self) -> None:
        run, line = self.selected(), self.query_one(ReasonLine)
        line.backfilled = run is not None and run.id in self.model.backfilled
        line.run = run

    @on(QueueTable.RowSelected)
    def _selected(self) -> None:
        self.action_details()

    def selected(self) -> Run | None:
        rid = self.query_one(QueueTable).selected_key
        return None if rid is None else self.model.runs.get(rid)

    def _named_selection(self) -> Run | None:
        run = self.selected()
        if run is None:
            self.notify("No run is highlighted.", severity="warning")
        elif not run.visible:
            self.notify("A job in another namespace: its details are private.", severity="error")
            return None
        return run

    # ------------------------------------------------------------ filters

    def _refilter(self) -> None:
        f = self.model.filters
        bar = self.query_one(FilterBar)
        bar.sort, bar.workspace, bar.state, bar.search = f.sort, f.workspace, f.state, f.search
        self.show_queue(Diff())

    @on(QueueTable.HeaderSelected)
    def _sort_by_header(self, event: QueueTable.HeaderSelected) -> None:
        by = HEADER_SORTS.get(event.column)
        if by is not None:
            self.model.filters.sort = by
            self._refilter()

    def action_sort(self) -> None:
        f = self.model.filters
        f.sort = SORTS[(SORTS.index(f.sort) + 1) % len(SORTS)]
        self._refilter()

    def action_workspace(self) -> None:
        f = self.model.filters
        choices: list[str | None] = [None, *self.model.workspaces()]
        at = choices.index(f.workspace) if f.workspace in choices else 0
        f.workspace = choices[(at + 1) % len(choices)]
        self._refilter()

    def action_state(self) -> None:
        f = self.model.filters
        choices: list[str | None] = [None, *STATES]
        f.state = choices[(choices.index(f.state) + 1) % len(choices)]
        self._refilter()

    def action_search(self) -> None:
        self.query_one(FilterBar).open_search()

    @on(FilterBar.SearchChanged)
    def _search(self, message: FilterBar.SearchChanged) -> None:
        self.model.filters.search = message.text.strip()
        self._refilter()

    @on(FilterBar.SearchDone)
    def _search_done(self) -> None:
        self.query_one(QueueTable).focus()

    def action_groups(self) -> None:
        from astraeus_tui.screens.groups import GroupsScreen

        self.app.push_screen(GroupsScreen(self.client))

    def action_usage(self) -> None:
        from astraeus_tui.screens.usage import UsageScreen

        self.app.push_screen(UsageScreen(self.client))

    def action_head(self) -> None:
        head = self.model.head
        if head is None:
            self.notify("No run waits at the head of the queue.")
        elif not self.query_one(QueueTable).select(head.id):
            self.notify(f"The head, {head.name}, is hidden by the filters.")

    def action_panel(self) -> None:
        panels = self.query_one("#panels")
        now = next((p for p in PANELS if panels.has_class(f"show-{p}")), PANELS[0])
        panels.remove_class(f"show-{now}")
        panels.add_class(f"show-{PANELS[(PANELS.index(now) + 1) % len(PANELS)]}")

    # ------------------------------------------------------------ actions

    def action_details(self, follow: bool = False) -> None:
        from astraeus_tui.screens.detail import RunDetailScreen

        run = self._named_selection()
        if run is not None:
            self.app.push_screen(RunDetailScreen(self.client, self.clock, run.name, follow))

    def action_logs(self) -> None:
        self.action_details(follow=True)

    def action_new_run(self) -> None:
        from astraeus_tui.screens.submit import SubmitScreen

        def submitted(name: str | None) -> None:
            table = self.query_one(QueueTable)
            table.focus()  # the next key is the queue's, never the Find box's
            if name:
                self.notify(f"Submitted run {name}.")
                self.call_after_refresh(table.select, name)

        self.app.push_screen(SubmitScreen(self.client, self.workspaces), submitted)

    def max_priority(self, workspace: str | None) -> int | None:
        found = next((w for w in self.workspaces if w.get("name") == workspace), None)
        return None if found is None else int(found.get("max_priority", 0))

    def action_priority(self) -> None:
        from astraeus_tui.screens.dialogs import PriorityScreen

        run = self._named_selection()
        if run is not None:
            limit = self.max_priority(run.workspace)
            self.app.push_screen(PriorityScreen(self.client, run, limit))

    def action_delete(self) -> None:
        from astraeus_tui.screens.dialogs import ConfirmScreen

        run = self._named_selection()
        if run is None:
            return
        name = run.name
        live = run.state in RunState.LIVE
        grace = self.status.get("stop_grace_seconds", 30)
        detail = (
            f"It is {run.state.lower()}: SIGTERM now, SIGKILL after {grace:g} s."
            if live
            else "It is queued: it is cancelled at once."
        )

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.delete_run(name)

        self.app.push_screen(ConfirmScreen(f"Delete run {name}?", detail, "Delete"), confirmed)

    @work(exclusive=True, group="delete", exit_on_error=False)
    async def delete_run(self, name: str) -> None:
        try:
            result = await self.client.delete(name)
        except ApiError as e:
            self.post_message(self.Done(str(e), error=True))
            return
        self.post_message(self.Done(f"{name}: {result.get('outcome', 'deleted')}"))

    def action_hold(self) -> None:
        """Hold the highlighted run, or release it when it is held (``held`` decides)."""
        run = self._named_selection()
        if run is not None:
            self.hold_run(run.name, "release" if run.held else "hold")

    @work(exclusive=True, group="hold", exit_on_error=False)
    async def hold_run(self, name: str, action: str) -> None:
        try:
            result = await self.client.control(name, action)
        except ApiError as e:
            self.post_message(self.Done(str(e), error=True))
            return
        self.post_message(self.Done(f"{name}: {result.get('outcome', action)}"))

    def on_main_screen_done(self, message: Done) -> None:
        self.notify(message.text, severity="error" if message.error else "information")
