"""The queue: a DataTable merged in place, fast at 10,000 rows.

Rows are keyed by run id and never rebuilt: changed cells are updated, new
runs added, gone runs removed, and the order set once per batch. What DataTable
does per row, or redoes after every cell update, is done here once per batch,
because at 10,000 rows it costs from tens of milliseconds to seconds:

- removing many rows (``remove_row`` renumbers every row each time);
- measuring column widths (ours are fixed, set from the table's width);
- listing the rows in order and their line offsets, which DataTable recomputes
  after any change, a cell's included: here only when rows come, go or move
  (every row is one line high).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import events
from textual._two_way_dict import TwoWayDict  # DataTable's own index; see _set_order
from textual.widgets import DataTable
from textual.widgets.data_table import Column, ColumnKey, Row, RowKey

from astraeus_tui.widgets import css_beside

COLUMNS = ("mark", "name", "workspace", "priority", "state", "gpus", "limit", "age", "start",
           "reason")  # fmt: skip
COLUMN_KEYS = tuple(ColumnKey(c) for c in COLUMNS)
START = Text("Start", justify="right")  # over its times, which line up on the right
LABELS: tuple[str | Text, ...] = ("#", "Run", "Workspace", "Prio", "State", "GPUs", "Limit", "Age",
                                  START, "Reason")  # fmt: skip
# Fixed widths at a wide and a narrow terminal; the reason takes what is left. Narrow,
# the limit and the age give their room to the start (0: hidden; the run's page has them).
WIDE = (4, 20, 10, 4, 8, 5, 5, 4, 11)
NARROW = (4, 14, 7, 4, 8, 4, 0, 0, 11)
MIN_REASON = 8
# Above these, one batch instead of remove_row (which renumbers every row) and add_row
FEW_ROWS, FEW_NEW = 500, 64
Cells = Callable[[str], Sequence[Text]]


@dataclass
class FixedColumn(Column):
    """A column of fixed width; at width 0 it is hidden, its padding too (cells are kept)."""

    def get_render_width(self, data_table: DataTable[Any]) -> int:
        return super().get_render_width(data_table) if self.width else 0


class QueueTable(DataTable[Text]):
    """Runs in order. ``merge(order, changed, cells)`` brings it up to date in place."""

    DEFAULT_CSS = css_beside(__file__)

    def __init__(self, **kwargs: object) -> None:
        self._row_of: dict[str, Row] = {}  # the rows by their keys as plain strings
        self._order: list[str] = []  # the rows in order, as last placed
        self._layout = 0  # bumped when rows come, go or move: not when a cell changes
        self._rows_at: tuple[int, list[Row]] = (-1, [])
        self._offsets_at: tuple[int, list[tuple[RowKey, int]]] = (-1, [])
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)  # type: ignore[arg-type]
        self.cursor_blink = False
        for key, label, width in zip(COLUMNS, LABELS, (*WIDE, MIN_REASON), strict=True):
            column = self.columns[self.add_column(label, key=key, width=width)]
            self.columns[column.key] = FixedColumn(column.key, column.label, width,
                                                   column.content_width)  # fmt: skip

    # ------------------------------------------------------------ merging

    def merge(self, order: Sequence[str], changed: set[str], cells: Cells) -> None:
        """Show the runs ``order`` names, in that order; re-render those in ``changed``."""
        selected = self.selected_key
        gone = sorted(self._row_of.keys() - set(order))
        new = [rid for rid in order if rid not in self._row_of]
        if (not gone or self.row_count < FEW_ROWS) and len(new) <= FEW_NEW:
            for rid in gone:
                self.remove_row(rid)
            for rid in new:
                self.add_row(*cells(rid), key=rid)
        else:
            self._bulk(gone, new, cells)
        fresh = set(new)
        updated = sum(
            self._update_row(rid, cells(rid))
            for rid in changed
            if rid in self._row_of and rid not in fresh
        )
        if updated:  # what update_cell does per cell, once: the columns' widths are fixed
            self._update_count += 1
            self.refresh()
        self._set_order(order, force=bool(gone or new))
        if selected is not None and selected in self._row_of:
            self.move_cursor(row=self.get_row_index(selected), animate=False, scroll=False)

    def update_column(self, column: str, value: Callable[[str], Text]) -> None:
        """Re-render one column of every row (ages), touching only cells that change."""
        key = ColumnKey(column)
        for row_key, row in self._data.items():
            new = value(str(row_key.value))
            if row.get(key) != new:
                row[key] = new
                self._update_count += 1
        self.refresh()

    def _update_row(self, rid: str, values: Sequence[Text]) -> int:
        """Put the cells that changed in place; how many did."""
        row, changed = self._data[self._row_of[rid].key], 0
        for key, value in zip(COLUMN_KEYS, values, strict=True):
            old = row.get(key)
            if old is not value and old != value:
                row[key] = value
                changed += 1
        return changed

    def _bulk(self, gone: list[str], new: list[str], cells: Cells) -> None:
        """Remove and add many rows at once; ``_set_order`` then numbers them, once."""
        for rid in gone:
            row = self._row_of.pop(rid)
            del self.rows[row.key]
            del self._data[row.key]
        columns = [ColumnKey(c) for c in COLUMNS]
        for rid in new:
            key = RowKey(rid)
            self._data[key] = dict(zip(columns, cells(rid), strict=True))
            self.rows[key] = self._row_of[rid] = Row(key, 1)

    def _set_order(self, order: Sequence[str], force: bool = False) -> None:
        """Place rows in ``order`` (as ``DataTable.sort`` does), if they are not already."""
        if not force and self._order == order:
            return
        self._order = list(order)
        rows = [self._row_of[rid] for rid in order]
        self._row_locations = TwoWayDict({row.key: i for i, row in enumerate(rows)})
        self._touch()
        self._rows_at = (self._layout, rows)

    def _touch(self) -> None:
        self._layout += 1
        self._update_count += 1
        self._require_update_dimensions = True
        self.cursor_coordinate = self.cursor_coordinate  # clamp it to the rows left
        self.refresh(layout=True)

    def add_row(self, *cells: Text, height: int | None = 1, key: str | None = None,
                label: Text | str | None = None) -> RowKey:  # fmt: skip
        self._layout += 1
        added = super().add_row(*cells, height=1, key=key, label=label)
        self._row_of[str(added.value)] = self.rows[added]
        return added

    def remove_row(self, row_key: RowKey | str) -> None:
        self._layout += 1
        self._row_of.pop(str(row_key.value if isinstance(row_key, RowKey) else row_key), None)
        super().remove_row(row_key)

    @property
    def ordered_rows(self) -> list[Row]:
        if self._rows_at[0] != self._layout:
            reverse, rows = self._row_locations._reverse, self.rows
            self._rows_at = (self._layout, [rows[reverse[i]] for i in range(len(rows))])
        return self._rows_at[1]

    @property
    def _y_offsets(self) -> list[tuple[RowKey, int]]:
        if self._offsets_at[0] != self._layout:
            self._offsets_at = (self._layout, [(row.key, 0) for row in self.ordered_rows])
        return self._offsets_at[1]

    def _update_dimensions(self, new_rows: object) -> None:
        # Every column has a fixed width: skip measuring each new row's cells.
        super()._update_dimensions(())

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
        self._touch()
