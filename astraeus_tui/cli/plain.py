"""The `astra ls` table without Rich: column widths from the data, colour only on a terminal.

``layout`` gives the same lines Rich's ``Table(box=None, pad_edge=False)`` prints for
the queue's columns (two spaces between columns, ``#``/PRIO/GPUS/AGE/START right-aligned,
NAME cut at 22 and WS at 10 with ``…`` (whole with ``--wide``), REASON shrunk to fit the
width and cut with ``…``), or None for what it does not lay out itself: a character that is not one
cell wide, a terminal narrower than the fixed columns, a wide reason that would wrap.
The header is bold only on a terminal, and never with ``NO_COLOR``.
"""

from __future__ import annotations

import os
import sys
import time

from astraeus_tui.text import shown
from astraeus_tui.when import epoch, idle_label, start_label
from runner.durations import compact
from runner.states import RunState

QUEUED = RunState.QUEUED

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing at start-up

if TYPE_CHECKING:
    from collections.abc import Sequence

    from runner.schema import Run

HEADER = ("#", "NAME", "WS", "PRIO", "STATE", "GPUS", "AGE", "START", "REASON")
RIGHT = (True, False, False, True, False, True, True, True, False)
MAX = (None, 22, 10, None, None, None, None, None, None)
RICH_ENV = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "JUPYTER_COLUMNS")
WIDE_REASON = 30  # --wide: the reason's room at the least; the table grows past the terminal


def age(iso: str | None, now: float | None = None) -> str:
    """How long ago ``iso`` was (``45s``, ``12m``, ``3h``, ``2d``); ``-`` for no time."""
    then = epoch(iso)
    if then is None:
        return "-"
    return compact((time.time() if now is None else now) - then, units=1)


def gpus_cell(held: Sequence[int] | None, asked: int) -> str:
    """GPUS: the GPUs a run holds (``0,1``), else how many it asks (``2``); ``-`` for a run
    that asks none (a CPU-only run's ``0`` read as GPU 0)."""
    if held:
        return ",".join(map(str, held))
    return str(asked) if asked else "-"


def run_cells(r: Run, now: float) -> list[str]:
    """One run's cells, escaped as the table shows them."""
    return Cells(now).of(r)


class Cells:
    """Rows of cells at one ``now``: an age or a start said once per distinct time (a
    queue's runs share their submit seconds and their estimates)."""

    def __init__(self, now: float, wide: bool = False) -> None:
        self.now = now
        self.wide = wide  # START with a forecast's 90 % start and the limits' (when.py)
        self._ages: dict[str | None, str] = {}
        self._starts: dict[tuple[object, ...], str] = {}

    def of(self, r: Run) -> list[str]:
        gpus = gpus_cell(r.gpus, r.gpus_requested)
        state = r.state
        mark = "▶" if r.head else (str(r.position) if r.position and state == QUEUED else "")
        submitted = r.submitted_at
        aged = self._ages.get(submitted)
        if aged is None:
            aged = self._ages[submitted] = age(submitted, self.now)
        key = (state, r.starts_by, r.likely_start, r.likely_start_90, r.restart_at)
        start = self._starts.get(key)
        if start is None:
            start = self._starts[key] = start_label(r, self.now, self.wide)
        shown_state = str(state)
        if r.idle_since is not None and (idle := idle_label(r, self.now)):
            shown_state = f"{state} ({idle})"  # its GPUs idle: the mark after the state
        cells = [mark, r.name, r.workspace, str(r.priority), shown_state, gpus, aged, start,
                 r.reason or ""]  # fmt: skip
        if "".join(cells).isprintable():
            return cells
        return [c if c.isprintable() else shown(c) for c in cells]

    def columns(self, runs: Sequence[Run]) -> list[list[str]]:
        """The cells of ``runs`` a column at a time (the table of ``of``, transposed): one
        pass a column, not a call a row (10,000 runs: a third of the time)."""
        ages, starts, now = self._ages, self._starts, self.now
        marks = ["▶" if r.head else (str(r.position) if r.position and r.state == QUEUED else "")
                 for r in runs]  # fmt: skip
        aged = [
            ages[s] if (s := r.submitted_at) in ages else self._age(s) for r in runs
        ]  # fmt: skip
        start = [
            starts[k]
            if (k := (r.state, r.starts_by, r.likely_start, r.likely_start_90, r.restart_at))
            in starts
            else self._start(k, r)
            for r in runs
        ]  # fmt: skip
        states = [
            str(r.state) if r.idle_since is None else self._idle_state(r, now) for r in runs
        ]  # fmt: skip
        gpus = [gpus_cell(r.gpus, r.gpus_requested) for r in runs]
        cells = [marks, [r.name for r in runs], [r.workspace for r in runs],
                 [str(r.priority) for r in runs], states, gpus, aged, start,
                 [r.reason or "" for r in runs]]  # fmt: skip
        return [
            column if "".join(column).isprintable()
            else [c if c.isprintable() else shown(c) for c in column]
            for column in cells
        ]  # fmt: skip

    def _age(self, submitted: str | None) -> str:
        aged = self._ages[submitted] = age(submitted, self.now)
        return aged

    def _start(self, key: tuple[object, ...], r: Run) -> str:
        start = self._starts[key] = start_label(r, self.now, self.wide)
        return start

    @staticmethod
    def _idle_state(r: Run, now: float) -> str:
        idle = idle_label(r, now)  # its GPUs idle: the mark after the state
        return f"{r.state} ({idle})" if idle else str(r.state)


def _one_cell_each(text: str) -> bool:
    """Every character one cell wide (as Rich counts them): no wide or combining ones."""
    if text.isascii():
        return True
    import unicodedata  # only for text that is not ASCII

    for c in text:
        o = ord(c)
        if o < 0x1100 or 0x2010 <= o <= 0x2027 or 0x2190 <= o <= 0x21FF or 0x25A0 <= o <= 0x25FF:
            if unicodedata.category(c) in ("Mn", "Me", "Cf"):
                return False
            continue
        return False
    return True


def terminal_width() -> int:
    """The width Rich's Console takes: ``COLUMNS``, else the first std stream's terminal."""
    columns = os.environ.get("COLUMNS")
    if columns is not None and columns.isdigit():
        return int(columns)
    if sys.stdout.isatty() and os.environ.get("TERM", "").lower() in ("dumb", "unknown"):
        return 80
    for fd in (0, 1, 2):
        try:
            return os.get_terminal_size(fd).columns or 80
        except (AttributeError, ValueError, OSError):
            continue
    return 80


def table_width(columns: Sequence[Sequence[str]], wide: bool) -> int:
    """The width the table is laid out in: the terminal's, or with ``wide`` at least what
    every column but the reason takes whole and WIDE_REASON for the reason. A wide table
    longer than the terminal's lines wraps there, as ``kubectl get -o wide`` does, rather
    than cutting the names and the starts it was asked for."""
    total = terminal_width()
    if not wide:
        return total
    pads = [1] + [2] * (len(HEADER) - 2)
    fixed = sum(  # names and workspaces whole: --wide cuts none
        max(len(HEADER[i]), max(map(len, columns[i]), default=0)) + pad
        for i, pad in enumerate(pads)
    )
    return max(total, fixed + 1 + WIDE_REASON)


def _widths(columns: Sequence[Sequence[str]], total: int, wide: bool) -> list[int] | None:
    """Each column's width with its padding (one space each side, none at the edges);
    NAME and WS cut at MAX but with ``wide``."""
    pads = [1] + [2] * (len(HEADER) - 2) + [1]
    widths = []
    for i, header in enumerate(HEADER):
        width = max(len(header), max(map(len, columns[i]), default=0)) + pads[i]
        cap = None if wide else MAX[i]
        widths.append(min(width, total, cap + pads[i]) if cap else min(width, total))
    excess = sum(widths) - total
    if excess > 0:  # only REASON shrinks; Rich's last resort (all columns) is Rich's
        if excess > widths[-1] - 2:
            return None
        widths[-1] -= excess
    return widths


def _cell(text: str, width: int, right: bool) -> str:
    if len(text) > width:
        text = text[: width - 1] + "…"
    return text.rjust(width) if right else text.ljust(width)


def layout(rows: list[list[str]], wide: bool) -> list[str] | None:
    """The table's lines of ``rows`` (each a run's cells, ``Cells.of``)."""
    columns: list[Sequence[str]] = list(zip(*rows, strict=True)) if rows else [()] * len(HEADER)
    return layout_columns(columns, wide)


def layout_columns(columns: Sequence[Sequence[str]], wide: bool) -> list[str] | None:
    """The table's lines of ``columns`` (``Cells.columns``), or None: Rich lays it out."""
    total = table_width(columns, wide)
    if total < 1 or any(k in os.environ for k in RICH_ENV):
        return None
    if not all("".join(column).isascii() for column in columns) and not all(
        "".join(row).isascii() or all(_one_cell_each(c) for c in row)
        for row in zip(*columns, strict=True)
    ):
        return None
    widths = _widths(columns, total, wide)
    if widths is None:
        return None
    if wide and any(len(reason) > widths[-1] - 1 for reason in columns[-1]):
        return None  # a whole reason that must wrap: Rich folds it
    inner = [w - (1 if i in (0, len(widths) - 1) else 2) for i, w in enumerate(widths)]
    bold = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    header = [_cell(c, inner[i], RIGHT[i]) for i, c in enumerate(HEADER)]
    if bold:
        header = [f"\x1b[1m{p}\x1b[0m" for p in header]
    if min(inner) < 1:  # a column with no room: each cell as _cell cuts it
        padded = [[_cell(c, w, right) for c in column]
                  for column, w, right in zip(columns, inner, RIGHT, strict=True)]  # fmt: skip
        return ["  ".join(header), *map("  ".join, zip(*padded, strict=True))]
    cut = [_cut(column, w) for column, w in zip(columns, inner, strict=True)]
    line = "  ".join(
        f"{{:{'>' if right else '<'}{w}}}" for w, right in zip(inner, RIGHT, strict=True)
    )
    return ["  ".join(header), *map(line.format, *cut)]  # padded as _cell pads


def _cut(cells: Sequence[str], width: int) -> Sequence[str]:
    """A column's cells, the ones longer than ``width`` cut with … (as ``_cell`` cuts)."""
    if max(map(len, cells), default=0) <= width:
        return cells
    return [c if len(c) <= width else c[: width - 1] + "…" for c in cells]
