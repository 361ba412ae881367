"""The `astra` command: one module per command group, composed here."""

from __future__ import annotations

import sys

if __name__ == "__main__" or "astra" in sys.argv[0]:  # the hot path first, before typer loads
    from astraeus_tui.cli.fast import dispatch

    if (code := dispatch(sys.argv[1:])) is not None:
        sys.exit(code)

from typing import Any

import typer
import typer.core
from typer._click.exceptions import UsageError  # the click typer carries: its errors
from typer._click.utils import echo

from astraeus_tui.cli import (
    admin,
    controls,
    daemon,
    demo,
    doctor,
    drain,
    edits,
    enter,
    groups,
    machine,
    runs,
    sim,
    slurm,
    top,
    usage,
)
from astraeus_tui.cli.plan import plan_command

# Plain text, as the fast path says it: help as click lays it out, and a usage error in
# one line (`Error: No such option: --bogus; see astra ls --help`), not in a box that
# breaks it where the terminal ends (what TYPER_USE_RICH=0 does).
typer.core.HAS_RICH = False


def _usage_error(self: UsageError, file: Any = None) -> None:
    """click's UsageError.show, said in one line on stderr, with where help is."""
    where = f"; see {self.ctx.command_path} --help" if self.ctx is not None else ""
    echo(f"Error: {self.format_message()}{where}", file=file, err=True)


UsageError.show = _usage_error  # type: ignore[method-assign]

app = typer.Typer(
    help="Astraeus: a GPU run scheduler for one workstation or lab server.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)
daemon.register(app)
runs.register(app)
enter.register(app)
edits.register(app)
controls.register(app)
groups.register(app)
machine.register(app)
usage.register(app)
top.register(app)
app.add_typer(slurm.app, name="slurm")
drain.register(admin.app)
app.add_typer(admin.app, name="admin")
app.command("plan")(plan_command)
demo.register(app)
doctor.register(app)
sim.register(app)


def main() -> None:
    app(prog_name="astra")  # also as `python -m astraeus_tui.cli.main`: its usage says astra


if __name__ == "__main__":
    main()
