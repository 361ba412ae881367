"""What every command shares: the client, one-line errors, JSON and tables."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

from astraeus_tui.cli.fast.help import run_names
from astraeus_tui.cli.fast.options import FLAG, JSON, MULTI
from astraeus_tui.client import ApiError, Client
from astraeus_tui.text import shown

if TYPE_CHECKING:
    from astraeus_tui.cli.fast.options import Option, Options

T = TypeVar("T")
Command = TypeVar("Command", bound=Callable[..., Any])


def option(row: Option) -> Any:
    """typer's option from a row of cli/fast/options.py: its names, help and envvar."""
    names, _, help, _, _, envvar = row
    return typer.Option(*names, help=help, envvar=envvar)


def parameter(dest: str, row: Option) -> inspect.Parameter:
    """The command's parameter a row of cli/fast/options.py makes: a flag is a ``bool``, a
    repeatable option a ``list[str] | None``, a value its type (``| None`` when the default
    is None), with the row's default."""
    _, kind, _, of, default, _ = row
    hint: Any = bool if kind == FLAG else list[str] if kind == MULTI else of
    if default is None:
        hint = hint | None
    return inspect.Parameter(dest, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[hint, option(row)])  # fmt: skip


def table_options(options: Options) -> Callable[[Command], Command]:
    """The command takes ``options`` (a table of cli/fast/options.py) as its parameters, as
    typer reads them (``inspect.signature`` and the type hints): its own arguments first,
    then the table's options in its order; it receives them as ``**o``, by destination."""

    def give(command: Command) -> Command:
        own = inspect.signature(command, eval_str=True)
        kept = [p for p in own.parameters.values() if p.kind != p.VAR_KEYWORD]
        params = kept + [parameter(dest, row) for dest, row in options.items()]
        command.__signature__ = own.replace(parameters=params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        command.__annotations__["return"] = own.return_annotation
        return command

    return give


JsonOption = typer.Option(False, *JSON[0], help=JSON[2])


def fail(message: str, code: int = 1) -> NoReturn:
    """One clear line on stderr, a non-zero exit."""
    typer.echo(shown(message), err=True)
    raise typer.Exit(code)


def echo(line: str, err: bool = False) -> None:
    """Print one line that holds the daemon's text, unprintable characters escaped."""
    typer.echo(shown(line), err=err)


def call(fn: Callable[[Client], T]) -> T:
    try:
        return fn(Client())
    except ApiError as e:
        fail(str(e))


def spec_document(file: str, text: str | None = None) -> dict[str, Any]:
    """The run spec in ``file`` (``text``: stdin already read) as the daemon's document,
    checked here first with the daemon's own messages (JSON, TOML or #SBATCH)."""
    from runner.runspec.documents import load_spec_file, load_spec_text
    from runner.runspec.parse import SpecError, spec_to_dict
    from runner.runspec.printable import check_spec

    try:
        spec = load_spec_text(text) if text is not None else load_spec_file(file, os.environ)
        check_spec(spec)
    except SpecError as e:
        fail(f"422 INVALID_SPEC: {e}")
    from runner.runspec.build import with_submit_dir

    document = spec_to_dict(spec)
    with_submit_dir(document)  # the process executor starts it here
    return document


def console() -> Any:
    from rich.console import Console  # lazy: only for tables

    return Console()


def parse_duration(text: str) -> int:
    """``2h``, ``90m``, ``1h30m``, ``3600``, or Slurm's ``D-HH:MM:SS`` forms, in seconds."""
    from runner.durations import parse_duration as seconds

    try:
        return seconds(text)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None


# shell completion of run names, from the daemon (nothing when it is not there): typer's,
# and the fast path's, one function
complete_run = run_names


RAW_HELP = "Write the program's bytes as they are, also on a terminal."


def output_writer(raw: bool) -> Callable[[bytes], None]:
    """How a run's output is written: on a terminal, its control sequences but colour
    escaped (``astraeus_tui.terminal_out``); piped, or ``raw``, byte for byte."""
    import sys

    out = sys.stdout.buffer
    if raw or not sys.stdout.isatty():

        def write(chunk: bytes) -> None:
            out.write(chunk)
            out.flush()

        return write
    from astraeus_tui.terminal_out import TerminalText

    terminal = TerminalText()

    def escaped(chunk: bytes) -> None:
        out.write(terminal.feed(chunk).encode())
        out.flush()

    return escaped
