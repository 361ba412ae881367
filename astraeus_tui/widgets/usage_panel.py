"""Usage per workspace over the last days: GPU-hours and core-hours as bars, GPU-hours a
day (one bar each, oldest first, when the answer has them), then runs
by outcome, preemptions and the wait to a first start (p50/p95), from ``GET /v1/usage``."""

from __future__ import annotations

from rich.console import Group, JustifyMethod, RenderableType
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from astraeus_tui.fmt import bar
from astraeus_tui.widgets import css_beside
from runner.durations import compact
from runner.schema import Usage, UsageRow

BAR = 16
CORE_BAR = 8
DAY = 2  # cells a day's bar is wide
SPARKS = " ▁▂▃▄▅▆▇█"
OTHERS = "other workspaces"
OUTCOMES = (("succeeded", "ok", "green"), ("failed", "failed", "red"),
            ("cancelled", "cancelled", "yellow"))  # fmt: skip


def hours(value: float) -> str:
    """``41.5 h``, ``0.25 h``; ``0 h`` for nothing."""
    if value == 0:
        return "0 h"
    if value >= 100:
        return f"{value:.0f} h"
    return f"{value:.1f} h" if value >= 10 else f"{value:.2f} h"


def days(values: list[float], most: float) -> Text:
    """One bar a day, oldest first, as tall as its GPU-hours against ``most``; a day with
    none is a dim dot."""
    text = Text(no_wrap=True)
    for v in values:
        if v <= 0:
            text.append("·" * DAY, style="dim")
        else:
            spark = SPARKS[max(1, round(v / most * (len(SPARKS) - 1)))]
            text.append(spark * DAY, style="green")
    return text


def _count(row: UsageRow, key: str, style: str) -> Text:
    count = row.outcomes.get(key, 0)
    return Text(str(count), style=style if count else "dim")


def _wait(row: UsageRow) -> Text:
    if not row.runs or row.wait_p50_seconds is None:
        return Text("-", style="dim")
    return Text(
        f"{compact(row.wait_p50_seconds, cell=True)} / {compact(row.wait_p95_seconds, cell=True)}"
    )


def usage_rows(usage: Usage) -> Table:
    """One row a workspace: its bars scaled to the largest, and its numbers; then all."""
    most_gpu = max((r.gpu_hours for r in usage.rows), default=0.0) or 1.0
    most_cpu = max((r.core_hours for r in usage.rows), default=0.0) or 1.0
    daily = [r.daily_gpu_hours for r in usage.rows if isinstance(r.daily_gpu_hours, list)]
    most_day = max((v for d in daily for v in d), default=0.0) or 1.0
    per_day = len(daily) == len(usage.rows) and bool(daily)
    grid = Table.grid(padding=(0, 1, 0, 0))
    grid.add_column(no_wrap=True, overflow="ellipsis", min_width=9, max_width=16)
    right: JustifyMethod = "right"
    justify: list[JustifyMethod] = ["left", right, "left", *[right] * 7]
    heads = ["workspace", "GPU-hours", "", "core-h", "", "runs",
             *(word for _, word, _ in OUTCOMES), "preempted", "wait p50/p95"]  # fmt: skip
    if per_day:
        justify.insert(2, "left")
        heads.insert(3, "GPU-h a day")
    for j in justify:
        grid.add_column(no_wrap=True, justify=j)
    grid.add_row(*(Text(h, style="dim") for h in heads))
    for row in usage.rows:
        name = row.workspace if row.visible and row.workspace else OTHERS
        cells = [
            Text(name, style="bold" if row.visible else "dim italic"),
            bar(row.gpu_hours / most_gpu, BAR, "green"), Text(hours(row.gpu_hours)),
            bar(row.core_hours / most_cpu, CORE_BAR, "blue"), Text(hours(row.core_hours)),
            Text(str(row.runs)), *(_count(row, k, st) for k, _, st in OUTCOMES),
            Text(str(row.preemptions)), _wait(row),
        ]  # fmt: skip
        if per_day and isinstance(row.daily_gpu_hours, list):
            cells.insert(3, days(row.daily_gpu_hours, most_day))
        grid.add_row(*cells)
    t = usage.total
    cells = [
        Text("all", style="bold"), Text(""), Text(hours(t.gpu_hours), style="bold"), Text(""),
        Text(hours(t.core_hours), style="bold"), Text(str(t.runs), style="bold"),
        *(_count(t, k, st) for k, _, st in OUTCOMES), Text(str(t.preemptions)), _wait(t),
    ]  # fmt: skip
    if per_day:
        cells.insert(3, Text(""))
    grid.add_row(*cells)
    return grid


class UsagePanel(Widget):
    """``usage``: the daemon's answer; None until it came."""

    DEFAULT_CSS = css_beside(__file__)

    usage: reactive[Usage | None] = reactive(None)

    def on_mount(self) -> None:
        self.border_title = "Usage · last 7 days"

    def render(self) -> RenderableType:
        if self.usage is None:
            return Text("waiting for the daemon…", style="dim")
        since = (self.usage.since or "").replace("T", " ").removesuffix("Z")
        head = Text(f"Runs finished since {since[:16]} UTC, by workspace", style="dim")
        if not self.usage.rows:
            return Group(head, Text("No workspace has finished a run yet.", style="dim"))
        return Group(head, Text(""), usage_rows(self.usage))
