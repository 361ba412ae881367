"""The queue table alone, in a real Textual app: merges keep order, rows and the cursor,
on DataTable's public API only."""

from __future__ import annotations

import ast
import asyncio
from collections.abc import Sequence
from pathlib import Path

from rich.text import Text
from textual.app import App, ComposeResult

import astraeus_tui.widgets.queue_table as queue_table
from astraeus_tui.widgets.queue_table import QueueTable

FEW_ROWS, FEW_GONE = 500, 64  # a merge that removes many rows at once


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield QueueTable()


def cells(rid: str, reason: str = "waits") -> Sequence[Text]:
    return (Text(rid[1:]), Text(rid), *(Text("x") for _ in range(7)), Text(reason))


def names(table: QueueTable) -> list[str]:
    return [str(table.get_row_at(i)[1]) for i in range(table.row_count)]


def run(scenario: object) -> None:
    async def main() -> None:
        app = TableApp()
        async with app.run_test(size=(120, 30)) as pilot:
            await scenario(pilot, app.query_one(QueueTable))  # type: ignore[operator]

    asyncio.run(main())


def test_a_few_changes_are_merged_in_place() -> None:
    async def scenario(pilot: object, table: QueueTable) -> None:
        table.merge(["r1", "r2", "r3"], set(), cells)
        table.select("r2")
        row = table.rows["r2"]
        table.merge(["r3", "r4", "r2"], {"r2"}, lambda rid: cells(rid, f"now {rid}"))
        assert names(table) == ["r3", "r4", "r2"]
        assert table.rows["r2"] is row  # the same row, moved and updated
        assert str(table.get_cell("r2", "reason")) == "now r2"
        assert str(table.get_cell("r3", "reason")) == "waits"  # not in changed: as it was
        assert table.selected_key == "r2"  # the cursor follows its run

    run(scenario)


def test_many_gone_at_once_keep_the_order_and_the_cursor() -> None:
    async def scenario(pilot: object, table: QueueTable) -> None:
        ids = [f"r{i:04d}" for i in range(FEW_ROWS + 100)]
        table.merge(ids, set(), cells)
        table.select("r0550")
        kept = ids[::-1][: len(ids) - FEW_GONE - 1]  # reversed, and more than FEW_GONE gone
        table.merge(kept, set(), cells)
        assert names(table) == kept
        assert table.selected_key == "r0550"
        table.merge(ids, {"r0001"}, lambda rid: cells(rid, "back"))
        assert names(table) == ids
        assert str(table.get_cell("r0001", "reason")) == "back"

    run(scenario)


def test_ages_update_only_the_cells_that_change() -> None:
    async def scenario(pilot: object, table: QueueTable) -> None:
        table.merge(["r1", "r2"], set(), cells)
        table.update_column("age", lambda rid: Text("5m" if rid == "r2" else "x"))
        assert [str(table.get_cell(r, "age")) for r in ("r1", "r2")] == ["x", "5m"]

    run(scenario)


def private_names_not_its_own(source: str) -> set[str]:
    """Private attributes ``source`` uses that it neither defines nor sets in ``__init__``."""
    tree = ast.parse(source)
    own = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    for init in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        if init.name == "__init__":
            own |= {t.attr for n in ast.walk(init) if isinstance(n, ast.Assign | ast.AnnAssign)
                    for t in ([n.target] if isinstance(n, ast.AnnAssign) else n.targets)
                    if isinstance(t, ast.Attribute)}  # fmt: skip
    used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    return {a for a in used if a.startswith("_") and not a.startswith("__")} - own


def test_no_private_member_of_textual_is_used() -> None:
    """Private names used in the module are its own; nothing from ``textual._*``."""
    source = Path(queue_table.__file__).read_text()
    assert private_names_not_its_own(source) == set()
    modules = {n.module for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ImportFrom)}
    assert not [m for m in modules if m and "._" in m]
    poking = "def f(self):\n    self._data.clear()\n    self._row_locations = {}\n"
    assert private_names_not_its_own(poking) == {"_data", "_row_locations"}  # it would see it
