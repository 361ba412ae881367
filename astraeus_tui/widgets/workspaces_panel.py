"""Workspaces: usage against quota, dominant share, weight and maximum priority."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from astraeus_tui.fmt import bar, gib
from astraeus_tui.widgets import css_beside

USAGE_BAR = 6
UNITS = {"gpus": "GPUs", "cpu_cores": "cores", "memory": "mem", "workers": "workers"}


def amount_text(resource: str, value: float) -> str:
    if resource == "memory":
        return gib(value)
    return f"{value:g}"


def usage(ws: dict[str, Any]) -> Text:
    """The bar of the resource nearest its limit (GPUs first among equals)."""
    quota = ws.get("quota") or {}
    used = ws.get("usage") or {}
    limited = [(r, quota[r]) for r in UNITS if quota.get(r)]
    if not limited:
        return Text("no quota", style="dim")
    resource, limit = max(limited, key=lambda p: (used.get(p[0], 0) / p[1], p[0] == "gpus"))
    amount = used.get(resource, 0)
    fraction = amount / limit
    style = "red" if fraction >= 1 else "yellow" if fraction >= 0.75 else "green"
    text = bar(fraction, USAGE_BAR, style)
    unit = "" if resource == "gpus" else f" {UNITS[resource]}"
    return text.append(f" {amount_text(resource, amount)}/{amount_text(resource, limit)}{unit}")


class WorkspacesPanel(Widget):
    DEFAULT_CSS = css_beside(__file__)

    workspaces: reactive[list[dict[str, Any]] | None] = reactive(None)

    def on_mount(self) -> None:
        self.border_title = "Workspaces"

    def render(self) -> RenderableType:
        if self.workspaces is None:
            return Text("waiting for the daemon…", style="dim")
        grid = Table.grid(padding=(0, 1, 0, 0))
        grid.add_column(no_wrap=True, overflow="ellipsis", min_width=6, max_width=14)
        grid.add_column(no_wrap=True)
        grid.add_column(no_wrap=True, justify="right")
        grid.add_column(no_wrap=True, justify="right")
        grid.add_column(no_wrap=True, justify="right")
        rows = [
            (
                Text(ws.get("name", "?"), style="bold"),
                usage(ws),
                Text(f"{ws.get('dominant_share') or 0.0:.0%}"),
                Text(f"{ws.get('weight', 1):g}", style="dim"),
                Text(f"{ws.get('max_priority', 0)}"),
            )
            for ws in self.workspaces
        ]
        head = ("", "used/quota", "share", "wt", max_priority_head(rows, self.size.width))
        grid.add_row(*(Text(h, style="dim") for h in head))
        for row in rows:
            grid.add_row(*row)
        return grid


def max_priority_head(rows: Sequence[tuple[Text, ...]], width: int) -> str:
    """``Max priority`` where the panel is wide enough for it, else in two short lines."""
    heads = (0, len("used/quota"), len("share"), len("wt"), len("Max priority"))
    widths = [max([h, *(row[i].cell_len for row in rows)]) for i, h in enumerate(heads)]
    widths[0] = min(max(widths[0], 6), 14)  # the name column's bounds
    return "Max priority" if sum(widths) + len(widths) - 1 <= width else "max\nprio"
