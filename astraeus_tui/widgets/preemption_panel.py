"""While victims stop: each one, the run it makes room for, and its grace running out."""

from __future__ import annotations

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from astraeus_tui.fmt import Run, bar
from astraeus_tui.widgets import css_beside

GRACE_BAR = 20


class PreemptionPanel(Widget):
    """``victims``: runs in Stopping with ``stopping_for``; ``received``: when each was read."""

    DEFAULT_CSS = css_beside(__file__)

    victims: reactive[list[Run]] = reactive(list)
    received: dict[str, float]
    grace: reactive[float] = reactive(30.0)
    now: reactive[float] = reactive(0.0)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.received = {}
        self.border_title = "Preemption in progress"
        self.border_subtitle = "SIGTERM sent · SIGKILL when the grace ends"

    def watch_victims(self, victims: list[Run]) -> None:
        self.display = bool(victims)

    def left(self, run: Run) -> float | None:
        """Seconds of grace left, counted down from when the daemon last said."""
        told = run.stop_grace_left_seconds
        if told is None:
            return None
        told = float(told)
        elapsed = self.now - self.received.get(run.id, self.now)
        return max(0.0, told - max(0.0, elapsed))

    def render(self) -> RenderableType:
        grid = Table.grid(expand=True, padding=(0, 1))
        grid.add_column(no_wrap=True)
        grid.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        grid.add_column(justify="right", no_wrap=True)
        grid.add_column(no_wrap=True)
        width = GRACE_BAR if self.content_region.width >= 100 else GRACE_BAR // 2
        for run in self.victims:
            left = self.left(run)
            total = max(self.grace, left or 0.0, 1.0)
            grid.add_row(
                Text("■ " + str(run.name), style="bold red"),
                Text.assemble(
                    (f"{run.workspace} · prio {run.priority}", "dim"),
                    ("  → making room for ", ""),
                    (str(run.stopping_for), "bold yellow"),
                ),
                Text("stopping" if left is None else f"SIGKILL in {left:.0f} s", style="red"),
                bar(None if left is None else left / total, width, "red"),
            )
        return grid
