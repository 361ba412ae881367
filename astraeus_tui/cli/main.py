"""The `astra` command: one module per command group, composed here."""

from __future__ import annotations

import typer

from astraeus_tui.cli.plan import EXAMPLE_QUEUE, plan_command

app = typer.Typer(
    help="Astraeus: a GPU run scheduler for one workstation or lab server.",
    no_args_is_help=True,
    add_completion=True,
)
app.command("plan")(plan_command)


@app.command()
def up() -> None:
    """Run Astraeus. Until the daemon lands, shows the plan for the example queue."""
    typer.echo(f"The daemon is not built yet: the plan for {EXAMPLE_QUEUE.name} follows.")
    plan_command(EXAMPLE_QUEUE)


def main() -> None:
    app()
