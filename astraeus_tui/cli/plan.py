"""`astra plan FILE`: what the planner decides for a queue described in TOML."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from runner.planner.drains import Drain
    from runner.planner.plan import Plan, Snapshot

EXAMPLE_QUEUE = Path(__file__).resolve().parents[2] / "config" / "examples" / "queue.toml"


def render_plan(snapshot: Snapshot, result: Plan, console: Any) -> None:
    from rich.table import Table

    from runner.durations import utc_minute
    from runner.model import format_size

    started = {s.run: s for s in result.starts}
    victims = {p.run for p in result.preemptions}
    table = Table(title="Plan", expand=False)
    for column in ("#", "run", "ws", "prio", "gpus", "decision", "reason"):
        table.add_column(column, overflow="fold")
    by_name = {w.name: w for w in snapshot.waiting}
    for position, name in enumerate(result.order, 1):
        run = by_name[name]
        start = started.get(name)
        if start is not None:
            gpus = ",".join(str(g) for worker in start.gpus for g in worker) or "-"
            if start.gpu_share:
                gpus += f" ({format_size(start.gpu_share)} each)"
            decision = "backfill" if start.backfill else "start"
            reason = ""
        elif run.gpu_share:
            gpus = f"{run.gpu_count}x{format_size(run.gpu_share)}"
            decision = "head" if result.head and result.head.run == name else "wait"
            reason = result.reason(name) or ""
        else:
            gpus = str(run.ask().gpus)
            decision = "head" if result.head and result.head.run == name else "wait"
            reason = result.reason(name) or ""
        table.add_row(str(position), name, run.workspace, str(run.priority), gpus, decision, reason)
    for run in snapshot.waiting:  # kept out of the order: the whole machine drains
        kept = result.reason(run.name) if run.name not in result.order else None
        if kept is not None:
            table.add_row("-", run.name, run.workspace, str(run.priority),
                          str(run.ask().gpus), "wait", kept)  # fmt: skip
    console.print(table)
    for line in packing(snapshot, result):
        console.print(line, highlight=False)
    for unit in snapshot.running:
        if unit.run in victims:
            console.print(f"preempt {unit.run} (priority {unit.priority}), SIGTERM then SIGKILL")
    if result.head and result.head.shadow is not None:
        console.print(f"head {result.head.run}: shadow time {utc_minute(result.head.shadow)}")


def packing(snapshot: Snapshot, result: Plan) -> list[str]:
    """Each shared GPU after the plan: ``gpu 0 shared: a 20GiB, b 30GiB, 30GiB free``."""
    from runner.model import format_size

    sizes = snapshot.machine.sizes()
    on: dict[int, list[tuple[str, int]]] = {}
    for unit in snapshot.running:
        for g in unit.gpus if unit.gpu_share else ():
            on.setdefault(g, []).append((unit.run, unit.gpu_share))
    for start in result.starts:
        for g in (g for worker in start.gpus for g in worker) if start.gpu_share else ():
            on.setdefault(g, []).append((start.run, start.gpu_share))
    lines = []
    for g in sorted(on):
        free = max(0, sizes.get(g, 0) - sum(n for _, n in on[g]))
        shares = ", ".join(f"{run} {format_size(n)}" for run, n in on[g])
        lines.append(f"gpu {g} shared: {shares}, {format_size(free)} free")
    return lines


def plan_command(
    queue: Annotated[Path, typer.Argument(help="A queue file such as config/examples/queue.toml")],
) -> None:
    """Show what the planner decides for a queue described in TOML.

    While the daemon drains the machine (or some GPUs: astra admin drain), the plan
    says so, as a submit's would."""
    from rich.console import Console

    from runner.planner.plan import plan
    from runner.planner.queuefile import QueueFileError, load_queue

    try:
        snapshot, now = load_queue(queue.read_text(), str(queue))
    except OSError as e:
        typer.echo(f"error: {queue}: {e}", err=True)
        raise typer.Exit(2) from e
    except QueueFileError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from e
    from runner.planner.drains import drained_snapshot, explained

    drain = daemon_drains()
    result = explained(plan(drained_snapshot(snapshot, drain), now), snapshot, drain)
    render_plan(snapshot, result, Console())


def daemon_drains() -> Drain:
    """The daemon's drains now (``astra admin drain``), applied to the file's machine as a
    submit's plan is; none when no daemon answers."""
    from astraeus_tui.client import ApiError, Client
    from runner.planner.drains import NO_DRAIN, Drain, DrainedAs

    try:
        drains = Client(timeout=5).drains()
    except ApiError:
        return NO_DRAIN
    machine = drains.get("machine")
    rows = [DrainedAs(None, str(machine["reason"]))] if machine else []
    rows += [DrainedAs(int(g["index"]), str(g["reason"])) for g in drains.get("gpus", [])]
    return Drain.of(rows)
