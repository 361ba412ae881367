"""The queue: a DataTable merged in place, on DataTable's public API only.

Rows are keyed by run id and never rebuilt: changed cells are updated
(``update_cell``), new runs added (``add_row``), gone runs removed
(``remove_row``), and the order set once per batch (``sort``, by each row's place
in the order). Two things DataTable does per row would cost seconds at 10,000
rows, so they are done once per batch instead:

- removing many rows (``remove_row`` renumbers every row each time): above
  ``FEW_ROWS`` rows the table is cleared and filled again;
- measuring column widths: ours are fixed, set from the table's width.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import events
from textual.geometry import Size
from textual.widgets import DataTable
from textual.widgets.data_table import Column, ColumnKey

from astraeus_tui.widgets import css_beside

COLUMNS = ("mark", "name", "workspace", "priority", "state", "gpus", "limit", "age", "start",
           "reason")  # fmt: skip
START = Text("Start", justify="right")  # over its times, which line up on the right
LABELS: tuple[str | Text, ...] = ("#", "Run", "Workspace", "Prio", "State", "GPUs", "Limit", "Age",
                                  START, "Reason")  # fmt: skip
# Fixed widths at a wide and a narrow terminal; the reason takes what is left. Narrow,
# the limit and the age give their room to the start (0: hidden; the run's page has them).
WIDE = (4, 20, 10, 4, 8, 5, 5, 4, 11)
NARROW = (4, 14, 7, 4, 8, 4, 0, 0, 11)
MIN_REASON = 8
# Above these, the table is filled again at once instead of remove_row (which renumbers
# every row) for each gone run
FEW_ROWS, FEW_GONE = 500, 64
Cells = Callable[[str], Sequence[Text]]


@dataclass
class FixedColumn(Column):
    """A column of fixed width; at width 0 it is hidden, its padding too (cells are kept)."""

    def get_render_width(self, data_table: DataTable[Any]) -> int:
        return super().get_render_width(data_table) if self.width else 0


class Mark(Text):
    """The first cell of a row, which knows its row: ``sort`` hands its key only cells."""

    run_id: str = ""

    @classmethod
    def of(cls, cell: Text, run_id: str) -> Mark:
        mark = cls(cell.plain, style=cell.style, justify=cell.justify, no_wrap=cell.no_wrap,
                   overflow=cell.overflow, end=cell.end)  # fmt: skip
        mark.spans = list(cell.spans)
        mark.run_id = run_id
        return mark


class QueueTable(DataTable[Text]):
    """Runs in order. ``merge(order, changed, cells)`` brings it up to date in place."""

    DEFAULT_CSS = css_beside(__file__)

    def __init__(self, **kwargs: object) -> None:
        self._order: list[str] = []  # the rows in order, as last placed
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)  # type: ignore[arg-type]
        self.cursor_blink = False
        for key, label, width in zip(COLUMNS, LABELS, (*WIDE, MIN_REASON), strict=True):
            column = self.columns[self.add_column(label, key=key, width=width)]
            self.columns[column.key] = FixedColumn(column.key, column.label, width,
                                                   column.content_width)  # fmt: skip

    # ------------------------------------------------------------ merging

    def merge(self, order: Sequence[str], changed: set[str], cells: Cells) -> None:
        """Show the runs ``order`` names, in that order; re-render those in ``changed``."""
        selected, wanted = self.selected_key, set(order)
        gone = [rid for rid in self._order if rid not in wanted]
        if len(gone) > FEW_GONE and self.row_count >= FEW_ROWS:
            self._refill(order, cells)
        else:
            kept = [rid for rid in self._order if rid in wanted]
            for rid in gone:
                self.remove_row(rid)
            new = [rid for rid in order if rid not in self.rows]
            for rid in new:
                self.add_row(*self._row(rid, cells(rid)), key=rid)
            fresh = set(new)
            for rid in changed:
                if rid in wanted and rid not in fresh:
                    self._update_row(rid, cells(rid))
            self._place(order, kept + new)
        if selected is not None and selected in self.rows:
            self.move_cursor(row=self.get_row_index(selected), animate=False, scroll=False)

    def update_column(self, column: str, value: Callable[[str], Text]) -> None:
        """Re-render one column of every row (ages), touching only cells that change."""
        for rid in self._order:
            new = value(rid)
            if self.get_cell(rid, column) != new:
                self.update_cell(rid, column, new)

    def _row(self, rid: str, values: Sequence[Text]) -> list[Text]:
        return [Mark.of(values[0], rid), *values[1:]]

    def _update_row(self, rid: str, values: Sequence[Text]) -> None:
        """Put the cells that changed in place."""
        for key, value in zip(COLUMNS, self._row(rid, values), strict=True):
            old = self.get_cell(rid, key)
            if old is not value and old != value:
                self.update_cell(rid, key, value)

    def _refill(self, order: Sequence[str], cells: Cells) -> None:
        """Every row again, in order: one pass instead of a renumbering per gone row."""
        self.clear()
        for rid in order:
            self.add_row(*self._row(rid, cells(rid)), key=rid)
        self._order = list(order)

    def _place(self, order: Sequence[str], shown: list[str]) -> None:
        """Sort the rows into ``order`` if ``shown`` (their order now) is not it."""
        self._order = list(order)
        if shown != self._order:
            place = {rid: i for i, rid in enumerate(order)}
            self.sort(COLUMNS[0], key=lambda mark: place[mark.run_id])

    # ------------------------------------------------------------ reading

    @property
    def selected_key(self) -> str | None:
        if not self.row_count:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        except Exception:
            return None
        return None if key.value is None else str(key.value)

    def select(self, rid: str) -> bool:
        if rid not in self.rows:
            return False
        self.move_cursor(row=self.get_row_index(rid), animate=False)
        return True

    # ------------------------------------------------------------ widths

    def on_resize(self, event: events.Resize) -> None:
        widths = NARROW if event.size.width < 110 else WIDE
        padding = 2 * self.cell_padding * (1 + sum(1 for w in widths if w))
        reason = max(MIN_REASON, event.size.width - sum(widths) - padding - 1)
        for key, width in zip(COLUMNS, (*widths, reason), strict=True):
            self.columns[ColumnKey(key)].width = width
        width = sum(column.get_render_width(self) for column in self.ordered_columns)
        height = self.row_count + (self.header_height if self.show_header else 0)
        self.virtual_size = Size(width, height)
        self.refresh(layout=True)
