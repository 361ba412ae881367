"""What the fast commands share: one-line refusals, the daemon call, JSON."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

from astraeus_tui.client import ApiError, Client
from astraeus_tui.text import shown

T = TypeVar("T")


class Failed(Exception):
    """The one line on stderr and the exit code of a command that failed (typer's ``fail``)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def echo(line: str, err: bool = False) -> None:
    (sys.stderr if err else sys.stdout).write(shown(line) + "\n")


def call(fn: Callable[[Client], T]) -> T:
    try:
        return fn(Client())
    except ApiError as e:
        raise Failed(str(e)) from None


def finish(work: Callable[[], int]) -> int:
    """Run ``work``; a refusal is one line on stderr and its exit code."""
    try:
        return work()
    except Failed as e:
        echo(str(e), err=True)
        return e.code


def print_json(data: object) -> None:
    from astraeus_tui.cli.tables import print_json as dump

    dump(data)


def print_json_line(data: object) -> None:
    from astraeus_tui.cli.tables import print_json_line as dump

    dump(data)
