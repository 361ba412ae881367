"""`astra slurm sbatch`: submit a Slurm batch file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from astraeus_tui.cli.common import call, echo, fail

app = typer.Typer(help="Slurm compatibility.", no_args_is_help=True)


@app.command()
def sbatch(
    file: Annotated[Path, typer.Argument(help="A batch script with #SBATCH lines.")],
    nice: Annotated[int | None, typer.Option(help="Priority -N (as Slurm's --nice).")] = None,
) -> None:
    """Submit a batch script; prints `Submitted batch job <name>`."""
    from runner.runspec.parse import SpecError, spec_to_dict
    from runner.runspec.sbatch import parse_sbatch

    try:
        text = file.read_bytes().decode("utf-8")  # as written: a CR must reach the parser
    except (OSError, UnicodeDecodeError) as e:
        fail(f"error: cannot read {file}: {e}")
    try:
        spec = parse_sbatch(text, name_hint=file.stem, nice=nice, environ=os.environ)
    except SpecError as e:
        fail(f"422 INVALID_SPEC: {e}")
    from runner.runspec.build import with_submit_dir

    document = with_submit_dir(spec_to_dict(spec))  # sbatch: the job starts where it was sent
    run = call(lambda c: c.submit(document))
    echo(f"Submitted batch job {run.name}")
