"""The queue: a table that draws only the rows on screen, on Textual's public Line API.

The table holds every run of the order (its place, its cells once drawn) but renders
only the window the terminal shows, so 10,000 or 100,000 runs cost what 40 do:

- ``merge(order, changed, cells)`` takes the new order; rows are keyed by run id and
  kept: a new or changed run only remembers where its cells come from, and they are
  made when its row is first drawn or read (``get_cell``);
- ``update_column`` (the ages, every 30 s) is remembered and applied to a row when it
  is drawn, not to every row at once;
- nothing is measured: the column widths are fixed, set from the table's width.

It looks and answers as Textual's ``DataTable`` with a row cursor did (the same
component classes, keys, mouse, header clicks and messages), drawing each visible cell
through Rich as DataTable does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from rich.padding import Padding
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size, Spacing
from textual.message import Message
from textual.renderables.styled import Styled
from textual.scroll_view import ScrollView
from textual.strip import Strip

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
PADDING = 1  # on each side of a cell, as DataTable's cell_padding
LINES_KEPT = 2000  # drawn lines cached (a few screens' worth)
Cells = Callable[[str], Sequence[Text]]
EMPTY = Text(no_wrap=True, end="")
COLUMN_AT = {key: i for i, key in enumerate(COLUMNS)}

# DataTable's own look, under this widget's name (its component classes kept)
TABLE_CSS = """
QueueTable {
    background: $surface;
    color: $foreground;
    height: auto;
    max-height: 100%;
    &:focus {
        background-tint: $foreground 5%;
        & > .datatable--cursor {
            background: $block-cursor-background;
            color: $block-cursor-foreground;
            text-style: $block-cursor-text-style;
        }
        & > .datatable--header {
            background-tint: $foreground 5%;
        }
    }
    & > .datatable--header {
        text-style: bold;
        background: $panel;
        color: $foreground;
    }
    &:ansi > .datatable--header {
        background: ansi_bright_blue;
        color: ansi_default;
    }
    & > .datatable--cursor {
        background: $block-cursor-blurred-background;
        color: $block-cursor-blurred-foreground;
        text-style: $block-cursor-blurred-text-style;
    }
    & > .datatable--header-cursor {
        background: $accent-darken-1;
        color: $foreground;
    }
    & > .datatable--header-hover {
        background: $accent 30%;
    }
    & > .datatable--hover {
        background: $block-hover-background;
    }
}
"""


class Row:
    """One run's row: its cells once made, else where they come from."""

    __slots__ = ("at", "cells", "key", "source")

    def __init__(self, key: str, source: Cells, at: int) -> None:
        self.key, self.source, self.at = key, source, at
        self.cells: list[Text] | None = None


class QueueTable(ScrollView, can_focus=True):
    """Runs in order. ``merge(order, changed, cells)`` brings it up to date in place."""

    ALLOW_SELECT = False
    DEFAULT_CSS = TABLE_CSS + css_beside(__file__)
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "datatable--cursor", "datatable--hover", "datatable--header",
        "datatable--header-cursor", "datatable--header-hover",
    }  # fmt: skip
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Select", show=False),
        Binding("up", "cursor_up", "Cursor up", show=False),
        Binding("down", "cursor_down", "Cursor down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("ctrl+home", "scroll_top", "Top", show=False),
        Binding("ctrl+end", "scroll_bottom", "Bottom", show=False),
        Binding("home", "scroll_home", "Home", show=False),
        Binding("end", "scroll_end", "End", show=False),
    ]

    class _RowMessage(Message):
        """About one row of the table (``row_key``: its run id)."""

        def __init__(self, table: QueueTable, row_key: str | None) -> None:
            super().__init__()
            self.table, self.row_key = table, row_key

        @property
        def control(self) -> QueueTable:
            return self.table

    class RowHighlighted(_RowMessage):
        """The cursor moved to another row (``row_key``: its run id)."""

    class RowSelected(_RowMessage):
        """Enter, or a click on the highlighted row."""

    class HeaderSelected(Message):
        """A click on a column's header (``column``: its key, one of COLUMNS)."""

        def __init__(self, table: QueueTable, column: str) -> None:
            super().__init__()
            self.table, self.column = table, column

        @property
        def control(self) -> QueueTable:
            return self.table

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]  # ScrollView's own keywords
        self.rows: dict[str, Row] = {}  # by run id
        self._order: list[str] = []  # the rows in order
        self._index: dict[str, int] = {}  # run id -> its place in _order
        self._seq = 0  # bumped by every merge and column update
        self._column_values: dict[int, tuple[Callable[[str], Text], int]] = {}
        self._lines: dict[tuple[object, ...], Strip] = {}
        self.labels = [Text.from_markup(x) if isinstance(x, str) else x for x in LABELS]
        self.widths = [*WIDE, MIN_REASON]  # each column's width, padding not counted
        self.cursor_row = 0
        self.hover_row = 0
        self._show_hover = False

    # ------------------------------------------------------------ merging

    def merge(self, order: Sequence[str], changed: set[str], cells: Cells) -> None:
        """Show the runs ``order`` names, in that order; re-render those in ``changed``."""
        selected = self.selected_key
        self._seq += 1
        at, rows = self._seq, self.rows
        order = list(order)
        same = order == self._order  # the same runs in the same places: none added or gone
        if not same and (len(order) != len(rows) or rows.keys() != set(order)):
            wanted = set(order)
            for rid in [rid for rid in rows if rid not in wanted]:
                del rows[rid]
            for rid in order:
                if rid not in rows:
                    rows[rid] = Row(rid, cells, at)
        for rid in changed:
            row = rows.get(rid)
            if row is not None and row.at != at:
                row.source, row.cells, row.at = cells, None, at
        if not same:
            self._order = order
            self._index = {rid: i for i, rid in enumerate(order)}
        self._lines.clear()
        self._resize_virtual()
        if selected is not None and selected in self._index:
            self._move(self._index[selected], scroll=False)
        else:
            self._move(self.cursor_row, scroll=False)
        self.refresh()

    def update_column(self, column: str, value: Callable[[str], Text]) -> None:
        """Re-render one column of every row (ages): each row when it is next drawn."""
        self._seq += 1
        self._column_values[COLUMN_AT[column]] = (value, self._seq)
        self._lines.clear()
        self.refresh()

    def _cells(self, rid: str) -> list[Text]:
        """The row's cells, made now if they were not, with the column updates since."""
        row = self.rows[rid]
        cells = row.cells
        if cells is None:
            cells = row.cells = list(row.source(rid))
        for i, (value, at) in self._column_values.items():
            if at > row.at:
                new = value(rid)
                if cells[i] != new:
                    cells[i] = new
        row.at = self._seq
        return cells

    # ------------------------------------------------------------ reading

    @property
    def row_count(self) -> int:
        return len(self._order)

    def get_cell(self, rid: str, column: str) -> Text:
        return self._cells(str(rid))[COLUMN_AT[column]]

    def get_row_at(self, index: int) -> list[Text]:
        return list(self._cells(self._order[index]))

    def get_row_index(self, rid: str) -> int:
        return self._index[str(rid)]

    @property
    def selected_key(self) -> str | None:
        if not self._order:
            return None
        return self._order[min(self.cursor_row, len(self._order) - 1)]

    def select(self, rid: str) -> bool:
        if rid not in self._index:
            return False
        self._move(self._index[rid], scroll=True)
        return True

    # ------------------------------------------------------------ the cursor

    def _move(self, row: int, scroll: bool = True, animate: bool = False) -> None:
        """Put the cursor on ``row`` (clamped); say so when it lands on another run."""
        row = max(0, min(row, self.row_count - 1))
        old, self.cursor_row = self.cursor_row, row
        if old != row:
            self.refresh()
            if self._order:
                self.post_message(self.RowHighlighted(self, self._order[row]))
        if scroll:
            self._scroll_cursor_into_view(animate)

    def _scroll_cursor_into_view(self, animate: bool = False) -> None:
        if not self._order:
            return
        region = Region(0, self.cursor_row + 1, max(self.size.width, self._table_width()), 1)
        self.scroll_to_region(region, animate=animate, spacing=Spacing(1, 0, 0, 0), force=True)

    def _set_hover(self, active: bool) -> None:
        if self._show_hover != active:
            self._show_hover = active
            self.refresh()

    def action_cursor_up(self) -> None:
        self._set_hover(False)
        self._move(self.cursor_row - 1)

    def action_cursor_down(self) -> None:
        self._set_hover(False)
        self._move(self.cursor_row + 1)

    def _page(self) -> int:
        return self.scrollable_content_region.height - 1

    def action_page_down(self) -> None:
        self._set_hover(False)
        height = self._page()
        steps = max(1, min(height + 1, self.row_count - self.cursor_row))
        self.scroll_relative(y=height, animate=False, force=True)
        self._move(self.cursor_row + steps - 1, scroll=False)

    def action_page_up(self) -> None:
        self._set_hover(False)
        height = self._page()
        steps = max(1, min(height + 1, self.cursor_row + 1))
        self.scroll_relative(y=-height, animate=False)
        self._move(self.cursor_row - steps + 1, scroll=False)

    def action_scroll_top(self) -> None:
        self._set_hover(False)
        self._move(0)

    def action_scroll_bottom(self) -> None:
        self._set_hover(False)
        self._move(self.row_count - 1)

    def action_scroll_home(self) -> None:
        self._set_hover(False)
        self.scroll_x = 0

    def action_scroll_end(self) -> None:
        self._set_hover(False)
        self.scroll_x = self.max_scroll_x

    def action_select_cursor(self) -> None:
        self._set_hover(False)
        if self._order:
            self.post_message(self.RowSelected(self, self.selected_key))

    # ------------------------------------------------------------ the mouse

    def on_mouse_move(self, event: events.MouseMove) -> None:
        meta = event.style.meta
        if not meta or "row" not in meta:
            self._set_hover(False)
            return
        self._set_hover(True)
        if meta["row"] != self.hover_row:
            self.hover_row = meta["row"]
            self.refresh()

    def on_leave(self, _: events.Leave) -> None:
        self._set_hover(False)

    def on_click(self, event: events.Click) -> None:
        self._set_hover(True)
        meta = event.style.meta
        if "row" not in meta or "column" not in meta:
            return
        row, column = meta["row"], meta["column"]
        if row == -1:
            self.post_message(self.HeaderSelected(self, COLUMNS[column]))
        elif row < self.row_count:
            again = row == self.cursor_row
            self._move(row, animate=True)
            if again:
                self.post_message(self.RowSelected(self, self.selected_key))
            event.stop()

    # ------------------------------------------------------------ widths

    def _render_widths(self) -> list[int]:
        return [w + 2 * PADDING if w else 0 for w in self.widths]

    def _table_width(self) -> int:
        return sum(self._render_widths())

    def _resize_virtual(self) -> None:
        self.virtual_size = Size(self._table_width(), self.row_count + 1)

    def on_resize(self, event: events.Resize) -> None:
        widths = NARROW if event.size.width < 110 else WIDE
        padding = 2 * PADDING * (1 + sum(1 for w in widths if w))
        reason = max(MIN_REASON, event.size.width - sum(widths) - padding - 1)
        self.widths = [*widths, reason]
        self._lines.clear()
        self._resize_virtual()
        self.refresh(layout=True)

    def notify_style_update(self) -> None:
        self._lines.clear()
        super().notify_style_update()

    # ------------------------------------------------------------ drawing

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self.rich_style
        index = -1 if y == 0 else y - 1 + int(self.scroll_y)
        if index >= len(self._order):
            return Strip.blank(width, base)
        rid = "" if index < 0 else self._order[index]
        cursor, hover = index == self.cursor_row, self._show_hover and index == self.hover_row
        key = (index, rid, self._seq, cursor, hover, width, base, self.get_pseudo_class_state(),
               tuple(self.widths))  # fmt: skip
        line = self._lines.get(key)
        if line is None:
            if len(self._lines) > LINES_KEPT:
                self._lines.clear()
            line = self._lines[key] = self._draw(index, rid, cursor, hover, width, base)
        return line

    def _styles(self, header: bool, cursor: bool, hover: bool) -> Style:
        """The component style of a cell, as DataTable's: hover, then the cursor."""
        get = self.get_component_rich_style
        style = Style()
        if hover:
            style += get("datatable--hover")
            if header:
                style += get("datatable--header-hover")
        if cursor:
            style += get("datatable--cursor")
            if header:
                style += get("datatable--header-cursor")
        return style

    def _draw(self, index: int, rid: str, cursor: bool, hover: bool, width: int,
              base: Style) -> Strip:  # fmt: skip
        header = index < 0
        values = self.labels if header else self._cells(rid)
        row_style = self.get_component_rich_style("datatable--header") if header else base
        component = self._styles(header, cursor, hover)
        post = Style.from_color(color=component.color)  # the CSS's colour over the cell's
        console = self.app.console
        segments: list[Segment] = []
        for column, (value, cell_width) in enumerate(zip(values, self._render_widths(),
                                                         strict=True)):  # fmt: skip
            if not cell_width:
                continue
            options = self.app.console_options.update_dimensions(cell_width, 1)
            pre = row_style + Style.from_meta({"row": index, "column": column}) + component
            lines = console.render_lines(
                Styled(Padding(value or EMPTY, (0, PADDING)), pre_style=pre, post_style=post),
                options.update(no_wrap=True),
            )  # fmt: skip
            segments.extend(lines[0])
        extend = (
            row_style
            + component
            + Style.from_meta({"row": index, "column": 0, "out_of_bounds": True})
        )
        segments.append(Segment(" " * max(0, width - self._table_width()), extend))
        return Strip(segments).crop(0, width).adjust_cell_length(width, base).simplify()
