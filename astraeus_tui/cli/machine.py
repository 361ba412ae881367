"""Machine commands: gpus and workspaces."""

from __future__ import annotations

from typing import Any

import typer

from astraeus_tui.cli.common import JsonOption, call, console
from astraeus_tui.cli.tables import print_json
from astraeus_tui.text import plain
from runner.model import format_size
from runner.schema import Gpu


def gpus(as_json: bool = JsonOption) -> None:
    """Each GPU: who holds it, or whom it is held for, and what it reads."""
    data = call(lambda c: c.gpus())
    if as_json:
        print_json(data)
        return
    from rich.table import Table

    title = f"GPUs ({data.source})"
    table = Table(title=title, box=None, header_style="bold", title_justify="left")
    for col in ("GPU", "NAME", "MEM", "UTIL", "TEMP", "RUN"):
        table.add_column(col, no_wrap=col != "RUN", overflow="fold")
    for g in data.gpus:
        table.add_row(*(plain(c) for c in (
            _label(g), g.name + (" (simulated)" if g.simulated else ""),
            f"{format_size(g.memory_used)}/{format_size(g.memory_total)}",
            "-" if g.utilization is None else f"{g.utilization}%",
            "-" if g.temperature is None else f"{g.temperature}C", _holder(g),
        )))  # fmt: skip
    console().print(table)
    if data.not_enforced:
        console().print(plain(f"Not enforced: {data.not_enforced}"), highlight=False)
    for g in data.gpus:
        if g.shares:
            console().print(plain(shared_line(g)), highlight=False)


def shared_line(g: Gpu) -> str:
    """``gpu 0 shared: a 20GiB, b 30GiB, 30GiB free``; empty on a GPU no run shares."""
    if not g.shares:
        return ""
    parts = [f"{s.run} {format_size(s.bytes)}" for s in g.shares]
    free = max(0, g.memory_total - sum(s.bytes for s in g.shares))
    return f"gpu {g.index} shared: {', '.join(parts)}, {format_size(free)} free"


def _label(g: Gpu) -> str:
    """The GPU's index, and a MIG instance's place on its GPU: ``2 (0:1)``."""
    return str(g.index) if g.mig is None else f"{g.index} ({g.mig})"


def _holder(g: Gpu) -> str:
    if g.shares:
        return f"shared by {len(g.shares)} worker(s)"
    if g.drained:  # kept out of every plan: what runs on it finishes
        held = f"{g.holder.run} (worker {g.holder.worker}), " if g.holder else ""
        return f"{held}drained ({g.drained})"
    if g.holder:
        return f"{g.holder.run} (worker {g.holder.worker})"
    if g.held_for:
        return f"held for {g.held_for}"
    if g.foreign_pids:
        return "foreign process " + ",".join(str(p) for p in g.foreign_pids)
    return "free"


def _quota(q: dict[str, Any] | None) -> str:
    if not q:
        return "none"
    parts = []
    for key in ("gpus", "cpu_cores", "memory", "workers"):
        if q.get(key) is not None:
            value = format_size(q[key]) if key == "memory" else f"{q[key]:g}"
            parts.append(f"{key} {value}")
    return ", ".join(parts)


def workspaces(as_json: bool = JsonOption) -> None:
    """Usage, quota, dominant share, weight and maximum priority of each workspace."""
    rows = call(lambda c: c.workspaces())
    if as_json:
        print_json(rows)
        return
    from rich.table import Table

    table = Table(box=None, header_style="bold")
    for col in ("WORKSPACE", "GPUS", "QUOTA", "SHARE", "WEIGHT", "MAX PRIO"):
        table.add_column(col, overflow="fold")
    for w in rows:
        share, weight = f"{w['dominant_share']:.0%}", f"{w['weight']:g}"
        row = (w["name"], str(w["usage"]["gpus"]), _quota(w["quota"]), share, weight)
        table.add_row(*(plain(c) for c in (*row, str(w["max_priority"]))))
    console().print(table)


def register(app: typer.Typer) -> None:
    app.command("gpus")(gpus)
    app.command("workspaces")(workspaces)
