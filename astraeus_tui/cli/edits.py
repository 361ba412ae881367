"""`astra update RUN`: change a run's time limit, GPUs, CPUs, memory or priority."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from astraeus_tui.cli.common import JsonOption, call, complete_run, echo, parse_duration
from astraeus_tui.cli.tables import print_json

RunArg = Annotated[str, typer.Argument(help="The run's name.", autocompletion=complete_run)]


def change_of(
    time_limit: str | None, no_time_limit: bool, gpus: int | None, cpus: float | None,
    memory: str | None, priority: int | None,
) -> dict[str, Any]:  # fmt: skip
    """The PATCH body of `astra update` (docs/api.md), from its options."""
    change: dict[str, Any] = {}
    if time_limit is not None and no_time_limit:
        raise typer.BadParameter("give --time-limit or --no-time-limit, not both")
    if time_limit is not None:
        change["time_limit_seconds"] = parse_duration(time_limit)
    if no_time_limit:
        change["time_limit_seconds"] = None
    if gpus is not None:
        change["gpus"] = gpus
    if cpus is not None:
        change["cpu_cores"] = cpus
    if memory is not None:
        change["memory"] = memory
    if priority is not None:
        change["priority"] = priority
    if not change:
        raise typer.BadParameter(
            "give at least one of --time-limit, --gpus, --cpus, --memory, --priority"
        )
    return change


def update(
    name: RunArg,
    time_limit: Annotated[str | None, typer.Option(
        "--time-limit", "-t",
        help="The new time limit: 1h, 90m, 2-00:00:00; a bare number is seconds.")] = None,
    no_time_limit: Annotated[bool, typer.Option(
        "--no-time-limit", help="No time limit (admins, for a running run).")] = False,
    gpus: Annotated[int | None, typer.Option(help="GPUs per worker.")] = None,
    cpus: Annotated[float | None, typer.Option(help="CPU cores per worker.")] = None,
    memory: Annotated[str | None, typer.Option(
        help="Memory per worker, e.g. 64GiB (a bare number is bytes).")] = None,
    priority: Annotated[int | None, typer.Option(help="The new priority.")] = None,
    as_json: bool = JsonOption,
) -> None:  # fmt: skip
    """Change a waiting run (checked as a submit is), or a running run's time limit: a
    member may shorten it, an admin may also lengthen it."""
    change = change_of(time_limit, no_time_limit, gpus, cpus, memory, priority)
    run = call(lambda c: c.update(name, change))
    if as_json:
        print_json(run)
        return
    limit = "none" if run.time_limit_seconds is None else f"{run.time_limit_seconds} s"
    echo(
        f"{run.name}: time limit {limit}, {run.gpus_requested} GPUs, "
        f"{run.cpu_cores_requested:g} CPUs, priority {run.priority}"
    )


def register(app: typer.Typer) -> None:
    app.command("update", context_settings={"ignore_unknown_options": False})(update)
