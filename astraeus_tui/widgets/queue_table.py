"""The queue: a DataTable merged in place, fast at 10,000 rows.

Rows are keyed by run id and never rebuilt: changed cells are updated, new
runs added, gone runs removed, and the order set once per batch. Two things
DataTable does per row are done here per batch instead, because at 10,000 rows
they cost seconds: removing many rows (``remove_row`` renumbers every row each
time) and measuring column widths (our columns have fixed widths, set from the
table's width, so there is nothing to measure).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.text import Text
from textual import events
from textual._two_way_dict import TwoWayDict  # DataTable's own index; see _set_order
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, Row, RowKey

from astraeus_tui.widgets import css_beside

COLUMNS = ("mark", "name", "workspace", "priority", "state", "gpus", "limit", "age", "reason")
LABELS = ("#", "Run", "Workspace", "Prio", "State", "GPUs", "Limit", "Age", "Reason")
# fixed widths at a wide and a narrow terminal; the reason takes what is left
WIDE = (4, 22, 10, 4, 8, 5, 5, 4)
NARROW = (4, 14, 8, 4, 8, 5, 5, 4)
MIN_REASON = 16
Cells = Callable[[str], Sequence[Text]]


class QueueTable(DataTable[Text]):
    """Runs in order. ``merge(order, changed, cells)`` brings it up to date in place."""

    DEFAULT_CSS = css_beside(__file__)

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)  # type: ignore[arg-type]
        self.cursor_blink = False
        for key, label, width in zip(COLUMNS, LABELS, (*WIDE, MIN_REASON), strict=True):
            self.add_column(label, key=key, width=width)

    # ------------------------------------------------------------ merging

    def merge(self, order: Sequence[str], changed: set[str], cells: Cells) -> None:
        """Show the runs ``order`` names, in that order; re-render those in ``changed``."""
        selected = self.selected_key
        wanted = set(order)
        gone = [k.value for k in self.rows if k.value not in wanted]
        if gone:
            self._remove_many(gone)
        new = [rid for rid in order if rid not in self.rows]
        if len(new) < 64:
            for rid in new:
                self.add_row(*cells(rid), key=rid)
        else:
            self._add_many(new, cells)
        for rid in changed:
            if rid in wanted and rid not in new:
                self._update_row(rid, cells(rid))
        self._set_order(order)
        if selected is not None and selected in self.rows:
            self.move_cursor(row=self.get_row_index(selected), animate=False, scroll=False)

    def refresh_column(self, column: str, value: Callable[[str], Text]) -> None:
        """Re-render one column of every row (ages), touching only cells that change."""
        key = ColumnKey(column)
        for row_key, row in self._data.items():
            new = value(str(row_key.value))
            if row.get(key) != new:
                row[key] = new
                self._update_count += 1
        self.refresh()

    def _update_row(self, rid: str, values: Sequence[Text]) -> None:
        row = self._data[RowKey(rid)]
        for key, value in zip(COLUMNS, values, strict=True):
            if row.get(ColumnKey(key)) != value:
                self.update_cell(rid, key, value)

    def _remove_many(self, keys: list[str]) -> None:
        if len(keys) < 8:
            for key in keys:
                self.remove_row(key)
            return
        for key in keys:
            del self.rows[RowKey(key)]
            del self._data[RowKey(key)]
        left = sorted(self.rows, key=lambda k: self._row_locations.get(k) or 0)
        self._row_locations = TwoWayDict({k: i for i, k in enumerate(left)})
        self._touch()

    def _add_many(self, keys: list[str], cells: Cells) -> None:
        """``add_row`` for many rows at once: one clamp of the cursor, one refresh."""
        columns = [ColumnKey(c) for c in COLUMNS]
        start = self.row_count
        for i, rid in enumerate(keys):
            key = RowKey(rid)
            self._row_locations[key] = start + i
            self._data[key] = dict(zip(columns, cells(rid), strict=True))
            self.rows[key] = Row(key, 1)
        self._touch()

    def _set_order(self, order: Sequence[str]) -> None:
        """Place rows in ``order`` (as ``DataTable.sort`` does), if they are not already."""
        locations = self._row_locations
        if all(locations.get(RowKey(rid)) == i for i, rid in enumerate(order)):
            return
        self._row_locations = TwoWayDict({RowKey(rid): i for i, rid in enumerate(order)})
        self._touch()

    def _touch(self) -> None:
        self._update_count += 1
        self._require_update_dimensions = True
        self.cursor_coordinate = self.cursor_coordinate  # clamp it to the rows left
        self.refresh(layout=True)

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
        except Exception:  # noqa: BLE001 (no valid cursor: nothing is selected)
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
        padding = 2 * self.cell_padding * len(COLUMNS)
        reason = max(MIN_REASON, event.size.width - sum(widths) - padding - 2)
        for key, width in zip(COLUMNS, (*widths, reason), strict=True):
            self.columns[ColumnKey(key)].width = width
        self._touch()
