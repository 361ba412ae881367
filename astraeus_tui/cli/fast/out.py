"""What the fast commands share: one-line refusals, the daemon call, JSON.

A plain answer is read with the standard library's json (``call_json``, ``Row``); only
``--json`` forms decode it into runner/schema.py's Structs (``call``), as the typer
commands print them, so a plain call loads neither msgspec nor the schema.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from astraeus_tui.text import shown

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing at start-up

if TYPE_CHECKING:
    from typing import Any, TypeVar

    from astraeus_tui.client import Client

    T = TypeVar("T")


class Failed(Exception):
    """The one line on stderr and the exit code of a command that failed (typer's ``fail``)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


class Row:
    """A JSON object's members as attributes, as the Struct reads them; a member the answer
    left out reads None (the plain forms read only fields the daemon always sends)."""

    # a run's members the daemon leaves out unless they hold something, read on every row
    # of ``ls``: found here, not through __getattr__ after a failed lookup (10,000 rows:
    # a tenth of the command)
    likely_start = likely_start_90 = restart_at = idle_since = None

    def __init__(self, members: dict[str, Any]) -> None:
        self.__dict__ = members

    def __getattr__(self, name: str) -> Any:
        return None


def echo(line: str, err: bool = False) -> None:
    (sys.stderr if err else sys.stdout).write(shown(line) + "\n")


def call(fn: Callable[[Client], T]) -> T:
    from astraeus_tui.client import ApiError, Client

    try:
        return fn(Client())
    except ApiError as e:
        raise Failed(str(e)) from None


def call_json(method: str, target: str, body: object = None) -> Any:
    """The answer's plain JSON values (astraeus_tui/wire.py); a refusal is Failed."""
    from astraeus_tui.wire import ApiError, request

    try:
        return request(method, target, body)
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
