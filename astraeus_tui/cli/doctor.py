"""`astra doctor`: check the set-up (Docker, GPUs, drives, socket, config, state), say what
to fix, and exit non-zero when something will not work."""

from __future__ import annotations

from typing import Annotated

import typer

from astraeus_tui.cli.common import JsonOption
from astraeus_tui.cli.tables import print_json

MARKS = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}
COLOURS = {"ok": "green", "warn": "yellow", "fail": "red"}


def doctor(
    system: Annotated[
        bool,
        typer.Option(
            "--system",
            help="Check the lab-server layout: /etc/astraeus/config.toml, /var/lib/astraeus,"
            " /run/astraeus/astraeus.sock (run it as root).",
        ),
    ] = False,
    as_json: bool = JsonOption,
) -> None:
    """Check this machine's set-up; each problem comes with what to do about it."""
    from runner.daemon.doctor import Setup, run_checks  # lazy: the docker SDK, NVML

    setup = Setup.from_env(system=system)
    rows = run_checks(setup)
    if as_json:
        print_json([row._asdict() for row in rows])
    else:
        for row in rows:
            mark = typer.style(MARKS[row.status], fg=COLOURS[row.status], bold=True)
            typer.echo(f"{mark}  {row.name:<16} {row.message}")
            if row.fix and row.status != "ok":
                typer.echo(f"      {'':<16} fix: {row.fix}")
    failed = sum(row.status == "fail" for row in rows)
    if failed:
        if not as_json:
            typer.echo(f"{failed} problem(s) to fix", err=True)
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
