"""Accounting commands: `astra usage` (what finished runs used) and `astra history`
(the finished runs, one line each). Both read records that outlive the runs."""

from __future__ import annotations

import time

import typer

from astraeus_tui.cli.common import JsonOption, call, console, fail
from astraeus_tui.cli.tables import print_json
from astraeus_tui.text import plain
from astraeus_tui.when import epoch
from runner.durations import compact
from runner.schema import HistoryEntry, UsageRow

SinceOption = typer.Option(
    "7d", "--since", help="From when: a span back from now (7d, 12h, 2w) or a UTC date/time."
)
OUTCOMES = ("succeeded", "failed", "cancelled")


def _hours(value: float) -> str:
    return f"{value:.2f}" if value >= 0.01 or value == 0 else f"{value:.4f}"


def _when(iso: str | None, short: bool = False) -> str:
    """``2026-10-01 12:00`` (UTC); ``short``: ``10-01 12:00``."""
    t = epoch(iso)
    if t is None:
        return "-"
    return time.strftime("%m-%d %H:%M" if short else "%Y-%m-%d %H:%M", time.gmtime(t))


def _usage_cells(row: UsageRow, label: list[str]) -> list[str]:
    counts = [str(row.outcomes.get(k, 0)) for k in OUTCOMES]
    wait = "-" if row.wait_p50_seconds is None else (
        f"{compact(row.wait_p50_seconds, cell=True)}/{compact(row.wait_p95_seconds, cell=True)}"
    )  # fmt: skip
    return [
        *label, str(row.runs), *counts, _hours(row.gpu_hours), _hours(row.core_hours),
        str(row.preemptions), wait,
    ]  # fmt: skip


def usage(
    since: str = SinceOption,
    by: str = typer.Option("workspace", "--by", help="One row per workspace, or per user."),
    as_json: bool = JsonOption,
) -> None:
    """GPU-hours, core-hours, runs by outcome, preemptions and wait (submit to first start,
    p50/p95) of the runs finished since --since, per workspace or per user."""
    if by not in ("workspace", "user"):
        fail(f"--by: {by!r} is not workspace or user")
    data = call(lambda c: c.usage(since, by))
    if as_json:
        print_json(data)
        return
    from rich.table import Table

    title = f"Runs finished since {_when(data.since)} UTC, by {data.by}"
    table = Table(title=title, box=None, header_style="bold", title_justify="left",
                  padding=(0, 1, 0, 0), pad_edge=False)  # fmt: skip
    names = ["WORKSPACE", *(["USER"] if data.by == "user" else [])]
    for head in names:
        table.add_column(head, overflow="ellipsis", min_width=6)
    for head in ("RUNS", "OK", "FAILED", "CANCELLED", "GPU-H", "CORE-H", "PREEMPT",
                 "WAIT P50/P95"):  # fmt: skip
        table.add_column(head, justify="right", no_wrap=True, min_width=len(head))
    for row in data.rows:
        if row.visible:
            label = [row.workspace or "", *([row.user or ""] if data.by == "user" else [])]
        else:
            label = ["other workspaces", *([""] if data.by == "user" else [])]
        table.add_row(*(plain(c) for c in _usage_cells(row, label)))
    table.add_section()
    total = ["total", *([""] if data.by == "user" else [])]
    table.add_row(*(plain(c, "bold") for c in _usage_cells(data.total, total)))
    console().print(table)


def _history_cells(r: HistoryEntry) -> list[str]:
    code = "-" if r.exit_code is None else str(r.exit_code)
    return [
        _when(r.finished_at, short=True), r.name, r.workspace, r.owner, r.outcome, code,
        compact(r.elapsed_seconds, cell=True), compact(r.wait_seconds, cell=True), str(r.gpus),
        _hours(r.gpu_hours),
        str(r.preemptions),
    ]  # fmt: skip


def history(
    since: str = SinceOption,
    workspace: str | None = typer.Option(None, "--workspace", "-w", help="One workspace only."),
    limit: int = typer.Option(1000, "--limit", min=1, max=10_000, help="The newest N at most."),
    as_json: bool = JsonOption,
) -> None:
    """The runs finished since --since, oldest first: elapsed (first start to finish),
    outcome, exit code, wait, GPUs, GPU-hours and preemptions (PRE). Your workspaces'
    runs (admins: all)."""
    data = call(lambda c: c.history(since, workspace, limit))
    if as_json:
        print_json(data)
        return
    if not data.runs:
        typer.echo(f"No run finished since {_when(data.since)} UTC.")
        return
    from rich.table import Table

    table = Table(box=None, header_style="bold", padding=(0, 1, 0, 0), pad_edge=False)
    table.add_column("FINISHED", no_wrap=True, min_width=11)
    # the names kept whole before the workspaces and owners (a sweep's runs differ at the end)
    named = min(32, max(len(r.name) for r in data.runs))
    for head, least in (("NAME", named), ("WS", 5), ("OWNER", 5)):
        table.add_column(head, overflow="ellipsis", min_width=least)
    table.add_column("OUTCOME", no_wrap=True, min_width=9)
    for head in ("EXIT", "ELAPSED", "WAIT", "GPUS", "GPU-H", "PRE"):
        table.add_column(head, justify="right", no_wrap=True, min_width=len(head))
    for r in data.runs:
        table.add_row(*(plain(c) for c in _history_cells(r)))
    console().print(table)


def register(app: typer.Typer) -> None:
    app.command("usage")(usage)
    app.command("history")(history)
