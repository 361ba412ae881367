"""Groups of runs: `astra sweep`, `astra replicas`, `astra schedule`."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from astraeus_tui.cli.common import JsonOption, call, echo, fail, spec_document
from astraeus_tui.cli.tables import print_json
from astraeus_tui.group_text import describe

if TYPE_CHECKING:
    from runner.schema import Group, GroupDetail

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


def create_group(document: dict[str, Any], as_json: bool, name: str | None = None) -> None:
    """Create the group ``document`` asks for (``name``: its name, instead of the spec's)."""
    from runner.runspec.groups import parse_group
    from runner.runspec.parse import SpecError

    if name:
        document["name"] = name

    try:
        parse_group(document)
    except SpecError as e:
        fail(f"422 INVALID_SPEC: {e}")
    group = call(lambda c: c.create_group(document))
    _print(group, as_json, [f"Created {group.kind} {group.name} ({group.workspace}):"
                            f" {describe(group)}"])  # fmt: skip


def _print(answer: object, as_json: bool, lines: Iterable[str]) -> None:
    """The daemon's ``answer`` as JSON, or else these lines of it."""
    if as_json:
        print_json(answer)
        return
    for line in lines:
        echo(line)


def _ls(kind: str, as_json: bool) -> None:
    groups = call(lambda c: c.groups(kind))
    _print(groups, as_json, _ls_lines(kind, groups))


def _ls_lines(kind: str, groups: list[Group]) -> Iterator[str]:
    if not groups:
        yield f"No {kind} groups." if kind == "replicas" else f"No {kind}s."
    for g in groups:
        yield f"{g.name:<24} {g.workspace:<12} {describe(g)}"


def _show(name: str, as_json: bool) -> None:
    g = call(lambda c: c.group(name))
    _print(g, as_json, _show_lines(g))


def _show_lines(g: GroupDetail) -> Iterator[str]:
    yield f"{g.kind} {g.name} ({g.workspace}, owner {g.owner}, priority {g.priority})"
    yield f"  {describe(g)}"
    for r in g.run_objects:
        yield f"  {r.name:<32} {r.state:<10} {r.reason or ''}"
    for e in g.events[-10:]:
        yield f"  {e.time}  {e.kind:<10} {e.message}"


def _delete(name: str) -> None:
    result = call(lambda c: c.delete_group(name))
    runs = ", ".join(f"{n} {what}" for what, n in sorted(result["runs"].items())) or "no runs"
    echo(f"{name}: deleted ({runs})")


def ls_and_show(app: typer.Typer, kind: str, ls_help: str, show_help: str) -> None:
    """A group kind's `ls` and `show` commands, with these helps."""

    @app.command("ls", help=ls_help)
    def ls(as_json: bool = JsonOption) -> None:
        _ls(kind, as_json)

    @app.command("show", help=show_help)
    def show(name: NameArg, as_json: bool = JsonOption) -> None:
        _show(name, as_json)


def delete_command(app: typer.Typer, help: str) -> None:
    """A group kind's `delete` command, with this help."""

    @app.command("delete", help=help)
    def delete(name: NameArg) -> None:
        _delete(name)


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
    create_group(document, as_json, name)


ls_and_show(sweep_app, "sweep", "Sweeps and how far their runs are.", "A sweep's runs and events.")
delete_command(sweep_app, "Delete a sweep and its runs together.")


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
    document = {"kind": "replicas", "template": template(file), "replicas": replicas}
    create_group(document, as_json, name)


@replicas_app.command("scale")
def replicas_scale(
    name: NameArg, count: Annotated[int, typer.Argument(help="How many replicas.")]
) -> None:
    """Change how many replicas run (scaling down stops the highest-numbered ones)."""
    g = call(lambda c: c.change_group(name, {"replicas": count}))
    echo(f"{name}: {g.replicas} replica(s)")


ls_and_show(
    replicas_app, "replicas", "Replica groups: wanted and running.",
    "A replica group's runs and events.",
)  # fmt: skip
delete_command(replicas_app, "Delete a replica group and stop its runs.")


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
    document = {"kind": "schedule", "template": template(file), "cron": cron, "policy": policy}
    create_group(document, as_json, name)


ls_and_show(
    schedule_app, "schedule", "Schedules and when each fires next.",
    "A schedule's runs and events (skipped and refused firings too).",
)  # fmt: skip


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


delete_command(schedule_app, "Delete a schedule (and its runs).")


def register(app: typer.Typer) -> None:
    app.add_typer(sweep_app, name="sweep")
    app.add_typer(replicas_app, name="replicas")
    app.add_typer(schedule_app, name="schedule")
