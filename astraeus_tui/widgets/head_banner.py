"""The queue head: who runs next, why it waits, and when it starts at the latest."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from astraeus_tui.fmt import Run, countdown, head_message
from astraeus_tui.when import epoch, utc_clock
from astraeus_tui.widgets import css_beside


class HeadBanner(Widget):
    DEFAULT_CSS = css_beside(__file__)

    head: reactive[Run | None] = reactive(None)
    loaded: reactive[bool] = reactive(False)
    now: reactive[float] = reactive(0.0)
    stop_left: reactive[float | None] = reactive(None)  # grace left of the victims, if any
    draining: reactive[str] = reactive("")  # the whole machine's drain reason, if it drains

    def when(self, head: Run) -> Text:
        preempting = head.reason_code in ("PREEMPTING", "STARTING")
        if self.stop_left is not None and preempting:
            return Text(f"starts as victims stop · ≤ {self.stop_left:.0f} s", style="bold red")
        shadow = epoch(head.starts_by)
        likely = epoch(head.likely_start) if isinstance(head.likely_start, str) else None
        ahead: tuple[tuple[str, str], ...] = ()  # the likely start, before the bound
        if likely is not None:
            near = utc_clock(likely, seconds=False, nearest=True)  # as START says it
            ahead = (("likely ", "dim"), (f"~{near}", "bold magenta"))
        if shadow is None:
            if likely is not None:
                return Text.assemble(*ahead, (" · no bound: work without a limit", "dim"))
            return Text("start time unknown", style="yellow")
        return Text.assemble(
            *ahead,
            (" · " if ahead else "", "dim"),
            ("starts by ", "dim"),
            (f"{utc_clock(shadow, seconds=False)} UTC", "bold"),
            (" · ", "dim"),
            (countdown(shadow - self.now), "bold yellow"),
        )

    def render(self) -> RenderableType:
        head = self.head
        if head is None:
            message = "Nothing waits for room: every run that can start has started."
            if self.draining:
                message = f"The machine is draining ({self.draining}): nothing new starts."
            if not self.loaded:
                message = "Connecting to the daemon…"
            return Text.assemble((" HEAD ", "bold reverse dim"), " ", (message, "dim"))
        title = Table.grid(expand=True, padding=(0, 1))
        title.add_column(no_wrap=True)
        title.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        title.add_column(justify="right", no_wrap=True)
        gpus = head.gpus_requested
        about = f"  {head.workspace} · priority {head.priority} · {gpus} GPU(s)"
        title.add_row(
            Text(" ▶ HEAD ", style="bold reverse yellow"),
            Text.assemble((head.name or "?", "bold"), (about, "dim")),
            self.when(head),
        )
        reason = Text(head_message(head), style="yellow")
        return Group(title, reason)
