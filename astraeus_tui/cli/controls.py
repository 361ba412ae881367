"""Run controls: hold, release, requeue, delete (the fast path's twins, cli/fast/controls.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from astraeus_tui.cli.common import complete_run
from astraeus_tui.cli.fast.controls import control_runs
from astraeus_tui.cli.fast.out import finish

RunsArg = Annotated[list[str], typer.Argument(help="Runs, by name.", autocompletion=complete_run)]


def hold(names: RunsArg) -> None:
    """Hold queued runs: out of the order (never the head) until released."""
    raise typer.Exit(finish(lambda: control_runs("hold", names)))


def release(names: RunsArg) -> None:
    """Release held runs: back to their place in the order (submission time kept)."""
    raise typer.Exit(finish(lambda: control_runs("release", names)))


def requeue(names: RunsArg) -> None:
    """Stop running runs with the grace and queue them again (no restart spent)."""
    raise typer.Exit(finish(lambda: control_runs("requeue", names)))


def delete(names: RunsArg) -> None:
    """Delete runs: queued ones are cancelled, running ones stopped with the grace."""
    raise typer.Exit(finish(lambda: control_runs("delete", names)))


def register(app: typer.Typer) -> None:
    for fn in (hold, release, requeue, delete):
        app.command(fn.__name__)(fn)
