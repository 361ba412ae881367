"""The commands people run often, without loading typer, rich or click.

`astra --help`, `astra COMMAND --help` and shell completion of the first word and of
run names are answered from texts made from the typer app (cli/fast/help.py).
`astra ls`, `run`, `submit`, `show`, `priority`, `delete`, `wait`, `hold`, `release`,
`requeue` and `serve` are parsed
here when their arguments have a shape this package fully understands (the same
options as the typer commands, from one table: cli/fast/options.py); anything else (``--help``, an
unknown option, a typo, a form it does not know) returns None and goes to the
typer app unchanged, so every output and error stays the typer command's. Set
``ASTRAEUS_CLI_FAST=0`` to send every call to typer (the tests compare both).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing at start-up

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Command = Callable[[list[str]], "int | None"]

# each command's module and function, imported only for that command
COMMANDS = {"ls": ("ls", "fast_ls"), "run": ("runs", "fast_run"),
            "submit": ("runs", "fast_submit"), "show": ("runs", "fast_show"),
            "priority": ("runs", "fast_priority"), "delete": ("controls", "fast_delete"),
            "wait": ("runs", "fast_wait"), "hold": ("controls", "fast_hold"),
            "release": ("controls", "fast_release"), "requeue": ("controls", "fast_requeue"),
            "serve": ("serve", "fast_serve")}  # fmt: skip


def _command(name: str) -> Command | None:
    found = COMMANDS.get(name)
    if found is None:
        return None
    from importlib import import_module

    command: Command = getattr(import_module(f"astraeus_tui.cli.fast.{found[0]}"), found[1])
    return command


def dispatch(argv: list[str]) -> int | None:
    """The exit code of a command handled here, or None to let typer handle ``argv``."""
    if os.environ.get("ASTRAEUS_CLI_FAST") == "0":
        return None
    if any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ):
        from astraeus_tui.cli.fast.help import fast_complete

        return fast_complete()  # the first word and run names; the rest is click's
    if not argv or argv[-1] == "--help":
        from astraeus_tui.cli.fast.help import fast_help

        return fast_help(argv)
    command = _command(argv[0])
    if command is None:
        return None
    try:
        return command(argv[1:])
    except KeyboardInterrupt:  # as typer ends it: silently, 130
        return 130
    except OSError as e:
        if e.errno != 32:  # EPIPE: the reader went away (`astra ls | head`)
            raise
        sys.stdout, sys.stderr = _Quiet(sys.stdout), _Quiet(sys.stderr)
        return 1


class _Quiet:
    """A stream whose final flush into a closed pipe says nothing (click does the same)."""

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped

    def flush(self) -> None:
        import contextlib

        with contextlib.suppress(BrokenPipeError):
            self.wrapped.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)
