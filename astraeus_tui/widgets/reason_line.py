"""Under the queue: the highlighted run's whole reason, which the table may cut."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from astraeus_tui.fmt import Run
from astraeus_tui.when import epoch, on_gpus, utc_clock
from astraeus_tui.widgets import css_beside
from runner.model import RunState


class ReasonLine(Widget):
    DEFAULT_CSS = css_beside(__file__)

    run: reactive[Run | None] = reactive(None, layout=True)
    backfilled: reactive[bool] = reactive(False, layout=True)

    def render(self) -> RenderableType:
        run = self.run
        if run is None:
            return Text("")
        text = Text(overflow="ellipsis")
        text.append(run.name or "?", style="bold")
        if run.paused:
            text.append(f"  {run.paused}.", style="magenta")
        return text.append("  " + (run.reason or self.running(run)))

    def running(self, run: Run) -> str:
        """What a run without a reason is doing: since when, where, until when at most."""
        state = str(run.state or "")
        started, limit = epoch(run.started_at), run.time_limit_seconds
        if state != RunState.RUNNING or started is None:
            return state
        line = f"Running since {utc_clock(started)} UTC {on_gpus(run.gpus)}"
        if limit:
            line += f"; its time limit ends it by {utc_clock(started + limit, seconds=False)} UTC"
        if self.backfilled:
            line += " (backfilled: started behind the head without delaying it)"
        return line + "."
