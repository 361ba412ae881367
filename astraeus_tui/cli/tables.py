"""Tables and JSON for the terminal; no typer here, so `astra ls` can skip it."""

from __future__ import annotations

import sys
import time

from astraeus_tui.cli.plain import age
from runner.states import RunState

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing at start-up

if TYPE_CHECKING:
    from runner.schema import Run

__all__ = [
    "age",
    "indented_json",
    "print_json",
    "print_json_line",
    "print_runs",
    "print_runs_rich",
    "show_runs",
]


# a float json writes in exponent form: msgspec writes 1e16 as 1e16, 1e-05 as 0.00001
_EXPONENT = rb"[0-9][eE][-+]?[0-9]|0\.0000"


def indented_json(data: object) -> str:
    """``json.dumps(data, indent=2)``, byte for byte, made by msgspec's encoder when it
    writes the same bytes: printable ASCII only (json escapes the rest as ``\\uXXXX``) and
    no float json writes in exponent form (``1e+16``, ``1e-05``); else by json itself
    (whose indenting encoder is pure Python: seconds for a queue of 10,000)."""
    import json  # here, not above: the plain table does without json, re and msgspec
    import re

    import msgspec

    try:
        fast = msgspec.json.format(msgspec.json.encode(data), indent=2)
    except (TypeError, ValueError, OverflowError):
        fast = None
    if (
        fast is not None
        and fast.isascii()
        and b"\x7f" not in fast
        and not re.search(_EXPONENT, fast)
    ):
        return fast.decode()
    return json.dumps(data, indent=2, default=str)


def print_json(data: object) -> None:
    """``data`` (the client's Structs, or plain JSON values) as the daemon sent it, indented:
    a Struct's fields keep the daemon's key order (runner/schema.py)."""
    import msgspec  # here, not above: the plain table does without it

    sys.stdout.write(indented_json(msgspec.to_builtins(data)) + "\n")


def print_json_line(data: object) -> None:
    """One compact JSON object on one line (NDJSON), flushed for a reader downstream."""
    import json

    import msgspec

    line = json.dumps(msgspec.to_builtins(data), default=str, separators=(",", ":"))
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def print_runs(runs: list[Run], wide: bool = False) -> None:
    """The queue as `astra ls` shows it: one line a run, the reason cut with `…` to fit.

    With ``wide`` the whole reason is shown (it may wrap; `show` and `why` always have it),
    and START gives a forecast's 90 % start and the start from the limits too.
    Laid out here as Rich lays out its table (same widths, same cuts, same bytes when not
    on a terminal) without importing Rich; the rare layouts it does not know go to Rich.
    """
    from astraeus_tui.cli.plain import Cells, layout_columns

    lines = layout_columns(Cells(time.time(), wide).columns(runs), wide)
    if lines is None:
        print_runs_rich(runs, wide)
        return
    sys.stdout.write("".join(line + "\n" for line in lines))


def print_runs_rich(runs: list[Run], wide: bool = False) -> None:
    """The queue drawn by Rich: the cases ``print_runs`` does not lay out itself (a reason
    that must wrap, wide characters, a terminal narrower than the fixed columns)."""
    from rich.console import Console
    from rich.table import Table

    from astraeus_tui.cli.plain import Cells, gpus_cell, table_width
    from astraeus_tui.text import plain
    from astraeus_tui.when import idle_label, start_label  # the dashboard's START too

    now = time.time()
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("#", justify="right", no_wrap=True)
    cut = None if wide else (22, 10)  # --wide: names and workspaces whole (plain.MAX)
    table.add_column("NAME", no_wrap=True, max_width=cut and cut[0], overflow="ellipsis")
    table.add_column("WS", no_wrap=True, max_width=cut and cut[1], overflow="ellipsis")
    table.add_column("PRIO", justify="right", no_wrap=True)
    table.add_column("STATE", no_wrap=True)
    table.add_column("GPUS", justify="right", no_wrap=True)
    table.add_column("AGE", justify="right", no_wrap=True)
    table.add_column("START", justify="right", no_wrap=True)
    table.add_column("REASON", overflow="fold" if wide else "ellipsis", ratio=1)
    for r in runs:
        gpus = gpus_cell(r.gpus, r.gpus_requested)
        waiting = r.state == RunState.QUEUED
        mark = "▶" if r.head else (str(r.position) if r.position and waiting else "")
        idle = idle_label(r, now)  # its GPUs idle: the mark after the state
        state = f"{r.state} ({idle})" if idle else r.state
        cells = (mark, r.name, r.workspace, str(r.priority), state, gpus,
                 age(r.submitted_at), start_label(r, now, wide), r.reason or "")  # fmt: skip
        *shown, reason = (plain(c) for c in cells)  # no markup, nothing unprintable
        if not wide:  # one line a run, as squeue: the cell shrinks, the text is cut with …
            reason.no_wrap, reason.overflow = True, "ellipsis"
        table.add_row(*shown, reason)
    width = table_width(Cells(now, wide).columns(runs), wide) if wide else None
    Console(width=width).print(table)


def show_runs(runs: list[Run], as_json: bool, wide: bool = False) -> None:
    if as_json:
        print_json(runs)
    elif runs:
        print_runs(runs, wide)
    else:
        print("No runs.")
