"""The top line: which machine, which executor, whether the daemon answers, the clock."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from astraeus_tui.when import utc_clock
from astraeus_tui.widgets import css_beside


class HeaderBar(Widget):
    DEFAULT_CSS = css_beside(__file__)

    status: reactive[dict[str, Any] | None] = reactive(None)
    gpus: reactive[int | None] = reactive(None)
    connected: reactive[bool | None] = reactive(None)
    error: reactive[str] = reactive("")
    now: reactive[float] = reactive(0.0)

    def machine(self) -> Text:
        status = self.status
        text = Text(no_wrap=True, overflow="ellipsis")
        if status is None:
            return text.append("waiting for the daemon…", style="dim")
        count = "?" if self.gpus is None else str(self.gpus)
        if status.get("executor") == "slurm":
            text.append(f"Slurm cluster · {count} GPUs", style="bold cyan")
        elif status.get("simulated"):
            text.append(f"{count} simulated GPUs", style="bold magenta")
        else:
            text.append(f"{count} GPUs", style="bold")
        text.append(f" · {status.get('executor', '?')} executor", style="")
        grace = status.get("stop_grace_seconds")
        if grace is not None:
            text.append(f" · stop grace {grace:g} s", style="dim")
        return text

    def daemon(self) -> Text:
        if self.connected is None:
            return Text("○ connecting", style="dim")
        if self.connected:
            errors = (self.status or {}).get("errors") or []
            if errors:
                return Text(f"● daemon up, {len(errors)} error(s)", style="yellow")
            return Text("● daemon up", style="green")
        return Text("● no daemon", style="bold red")

    def render(self) -> RenderableType:
        grid = Table.grid(expand=True, padding=(0, 1))
        grid.add_column(no_wrap=True)
        grid.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        grid.add_column(justify="right", no_wrap=True)
        clock = Text(f"{utc_clock(self.now)} UTC", style="bold")
        grid.add_row(
            Text(" ◆ Astraeus ", style="bold reverse"),
            self.machine(),
            Text.assemble(self.daemon(), "  ", clock),
        )
        return grid
