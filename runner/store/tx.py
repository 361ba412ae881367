"""The unit of work: one open write transaction, as the store's write methods take it.

``Store.transaction()`` yields a :class:`Tx`; the code outside runner/store/ hands it to
the store's typed methods (``store.claim_start(tx, …)``, ``store.add_event(tx, …)``),
which run their statements through it. It has no public way to run SQL: every
statement lives in runner/store/.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from enum import Enum
from typing import Any

from runner.reasons import Reason, ReasonCode


class Keep(Enum):
    """A write method's argument left as it is in the row (the column is not written)."""

    KEEP = "keep"


KEEP = Keep.KEEP


class Tx:
    """One BEGIN IMMEDIATE … COMMIT, open while the ``with`` block of transaction() runs."""

    __slots__ = ("_conn", "_notes")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        # events that may be notified: (run, code, message, time), queued at COMMIT
        self._notes: list[tuple[str, ReasonCode, Reason, float]] = []

    def _sql(self, statement: str, args: Iterable[Any] = ()) -> sqlite3.Cursor:
        """For runner/store/ only: run one statement within this transaction."""
        return self._conn.execute(statement, tuple(args))

    def _many(self, statement: str, rows: Iterable[Iterable[Any]]) -> None:
        """For runner/store/ only: one statement for each of ``rows`` (executemany)."""
        self._conn.executemany(statement, (tuple(r) for r in rows))

    def _update(self, table: str, where: str, key: tuple[Any, ...], fields: dict[str, Any]) -> None:
        """For runner/store/ only: ``UPDATE table SET …`` of the fields not left as KEEP."""
        written = {k: v for k, v in fields.items() if v is not KEEP}
        if written:
            cols = ", ".join(f"{k} = ?" for k in written)
            self._sql(f"UPDATE {table} SET {cols} WHERE {where}", (*written.values(), *key))
