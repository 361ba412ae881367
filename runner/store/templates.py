"""The templates table: a run document stored once, shared by the runs (and the group)
made from it; a template never changes and its id is never used again."""

from __future__ import annotations

import json
from typing import Any

from runner.store.core import Core
from runner.store.tx import Tx


class Templates:
    """Reads and writes of ``templates``, with the documents read kept."""

    def __init__(self, core: Core) -> None:
        self._core = core
        self._docs: dict[int, dict[str, Any]] = {}  # doc()'s cache (committed rows only)

    def insert(self, tx: Tx, document: dict[str, Any]) -> int:
        """Store a run template (a run document) once; its id for the runs made from it."""
        cursor = tx._sql("INSERT INTO templates (spec) VALUES (?)", (json.dumps(document),))
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def doc(self, template: int) -> dict[str, Any]:
        """A template's document, read once: a template never changes, its id is never
        used again (shared by its runs' rows: run_document copies, never changes it)."""
        cache = self._docs
        doc = cache.get(template)
        if doc is None:
            sql = "SELECT spec FROM templates WHERE id = ?"
            row = self._core.connect().execute(sql, (template,)).fetchone()
            if row is None:
                raise KeyError(f"template {template} is missing from the state database")
            doc = cache[template] = json.loads(row[0])
        return doc

    def drop_if_unused(self, tx: Tx, template: int) -> None:
        """Forget a template once neither a group nor a run refers to it (and its cached
        document: ids are never used again, so a rolled-back drop only costs a read)."""
        gone = tx._sql(
            "DELETE FROM templates WHERE id = ? AND NOT EXISTS (SELECT 1 FROM runs WHERE"
            " template = ?) AND NOT EXISTS (SELECT 1 FROM groups WHERE template = ?)",
            (template, template, template),
        )
        if gone.rowcount:
            self._docs.pop(template, None)
