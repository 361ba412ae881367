"""Groups of runs: `astra sweep`, `astra replicas`, `astra schedule`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from astraeus_tui.cli.common import JsonOption, call, echo, fail, spec_document
from astraeus_tui.cli.tables import print_json
from astraeus_tui.group_text import describe

sweep_app = typer.Typer(help="Sweeps: one submit, a run per parameter set.", no_args_is_help=True)
replicas_app = typer.Typer(
    help="Replica groups: N identical runs kept running.", no_args_is_help=True
)
schedule_app = typer.Typer(
    help="Schedules: a run at each time of a cron expression.", no_args_is_help=True
)

NameArg = Annotated[str, typer.Argument(help="The group's name.")]
FileArg = Annotated[str, typer.Argument(help="A run spec (JSON, TOML or #SBATCH), or - for stdin.")]
NameOption = Annotated[
    str | None, typer.Option("--name", help="The group's name (default: the spec's).")
]


def template(file: str) -> dict[str, Any]:
    """The run spec in ``file`` (``-``: stdin) as a group's template document."""
    return spec_document(file, sys.stdin.read() if file == "-" else None)


def create_group(document: dict[str, Any], as_json: bool) -> None:
    from runner.runspec.groups import parse_group
    from runner.runspec.parse import SpecError

    try:
        parse_group(document)
    except SpecError as e:
        fail(f"422 INVALID_SPEC: {e}")
    group = call(lambda c: c.create_group(document))
    if as_json:
        print_json(group)
        return
    echo(f"Created {group.kind} {group.name} ({group.workspace}): {describe(group)}")


def _ls(kind: str, as_json: bool) -> None:
    groups = call(lambda c: c.groups(kind))
    if as_json:
        print_json(groups)
        return
    if not groups:
        echo(f"No {kind} groups." if kind == "replicas" else f"No {kind}s.")
        return
    for g in groups:
        echo(f"{g.name:<24} {g.workspace:<12} {describe(g)}")


def _show(name: str, as_json: bool) -> None:
    g = call(lambda c: c.group(name))
    if as_json:
        print_json(g)
        return
    echo(f"{g.kind} {g.name} ({g.workspace}, owner {g.owner}, priority {g.priority})")
    echo(f"  {describe(g)}")
    for r in g.run_objects:
        echo(f"  {r.name:<32} {r.state:<10} {r.reason or ''}")
    for e in g.events[-10:]:
        echo(f"  {e.time}  {e.kind:<10} {e.message}")


def _delete(name: str) -> None:
    result = call(lambda c: c.delete_group(name))
    runs = ", ".join(f"{n} {what}" for what, n in sorted(result["runs"].items())) or "no runs"
    echo(f"{name}: deleted ({runs})")


# ------------------------------------------------------------------ sweeps


def _grid(pairs: list[str]) -> dict[str, list[str]]:
    grid: dict[str, list[str]] = {}
    for pair in pairs:
        key, sep, values = pair.partition("=")
        if not sep or not values:
            raise typer.BadParameter(f"{pair!r}: use NAME=V1,V2,...")
        grid[key] = values.split(",")
    return grid


@sweep_app.command("submit")
def sweep_submit(
    file: FileArg,
    grid: Annotated[
        list[str] | None, typer.Option(help="NAME=V1,V2,... (every combination).")
    ] = None,
    name: NameOption = None,
    as_json: bool = JsonOption,
) -> None:
    """Submit a sweep: the spec's `spec.sweep` (grid or list), or --grid options."""
    from runner.runspec.documents import decode_document
    from runner.runspec.groups import sweep_document
    from runner.runspec.parse import SpecError

    document: dict[str, Any] | None = None
    if not grid:
        text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
        fmt = "json" if text.lstrip().startswith("{") else "toml"
        try:
            document = sweep_document(decode_document(text, fmt))
        except SpecError as e:
            fail(f"422 INVALID_SPEC: {e}")
        if document is None:
            fail("422 INVALID_SPEC: spec.sweep: required (a grid or a list), or give --grid")
    else:
        document = {"kind": "sweep", "template": template(file), "grid": _grid(grid)}
    if name:
        document["name"] = name
    create_group(document, as_json)


@sweep_app.command("ls")
def sweep_ls(as_json: bool = JsonOption) -> None:
    """Sweeps and how far their runs are."""
    _ls("sweep", as_json)


@sweep_app.command("show")
def sweep_show(name: NameArg, as_json: bool = JsonOption) -> None:
    """A sweep's runs and events."""
    _show(name, as_json)


@sweep_app.command("delete")
def sweep_delete(name: NameArg) -> None:
    """Delete a sweep and its runs together."""
    _delete(name)


# ---------------------------------------------------------------- replicas


@replicas_app.command("create")
def replicas_create(
    file: FileArg,
    replicas: Annotated[
        int, typer.Option("--replicas", "-n", help="How many to keep running.")
    ] = 1,
    name: NameOption = None,
    as_json: bool = JsonOption,
) -> None:
    """Keep N copies of a run going: each restarted when it ends, each preempted alone."""
    document: dict[str, Any] = {
        "kind": "replicas",
        "template": template(file),
        "replicas": replicas,
    }
    if name:
        document["name"] = name
    create_group(document, as_json)


@replicas_app.command("scale")
def replicas_scale(
    name: NameArg, count: Annotated[int, typer.Argument(help="How many replicas.")]
) -> None:
    """Change how many replicas run (scaling down stops the highest-numbered ones)."""
    g = call(lambda c: c.change_group(name, {"replicas": count}))
    echo(f"{name}: {g.replicas} replica(s)")


@replicas_app.command("ls")
def replicas_ls(as_json: bool = JsonOption) -> None:
    """Replica groups: wanted and running."""
    _ls("replicas", as_json)


@replicas_app.command("show")
def replicas_show(name: NameArg, as_json: bool = JsonOption) -> None:
    """A replica group's runs and events."""
    _show(name, as_json)


@replicas_app.command("delete")
def replicas_delete(name: NameArg) -> None:
    """Delete a replica group and stop its runs."""
    _delete(name)


# --------------------------------------------------------------- schedules


@schedule_app.command("create")
def schedule_create(
    file: FileArg,
    cron: Annotated[
        str, typer.Option(help="When: a cron expression, e.g. '0 3 * * *' (local time).")
    ],
    policy: Annotated[
        str, typer.Option(help="If the previous run is still going: skip, queue or replace.")
    ] = "skip",
    name: NameOption = None,
    as_json: bool = JsonOption,
) -> None:
    """Submit a run at each time of a cron expression."""
    document: dict[str, Any] = {
        "kind": "schedule",
        "template": template(file),
        "cron": cron,
        "policy": policy,
    }
    if name:
        document["name"] = name
    create_group(document, as_json)


@schedule_app.command("ls")
def schedule_ls(as_json: bool = JsonOption) -> None:
    """Schedules and when each fires next."""
    _ls("schedule", as_json)


@schedule_app.command("show")
def schedule_show(name: NameArg, as_json: bool = JsonOption) -> None:
    """A schedule's runs and events (skipped and refused firings too)."""
    _show(name, as_json)


@schedule_app.command("pause")
def schedule_pause(name: NameArg) -> None:
    """Stop firing until resumed."""
    call(lambda c: c.change_group(name, {"paused": True}))
    echo(f"{name}: paused")


@schedule_app.command("resume")
def schedule_resume(name: NameArg) -> None:
    """Fire again, from the next time on."""
    g = call(lambda c: c.change_group(name, {"paused": False}))
    echo(f"{name}: resumed, next {g.next_at}")


@schedule_app.command("delete")
def schedule_delete(name: NameArg) -> None:
    """Delete a schedule (and its runs)."""
    _delete(name)


def register(app: typer.Typer) -> None:
    app.add_typer(sweep_app, name="sweep")
    app.add_typer(replicas_app, name="replicas")
    app.add_typer(schedule_app, name="schedule")
