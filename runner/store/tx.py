"""The unit of work: one open write transaction, as the store's write methods take it.

``Store.transaction()`` yields a :class:`Tx`; the code outside runner/store/ hands it to
the typed methods of the store's repositories (``store.runs.claim_start(tx, …)``,
``store.events.add(tx, …)``), which run their statements through it. It has no public
way to run SQL: every statement lives in runner/store/.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from enum import Enum
from typing import Any

from runner.notify.outbox import StartForecast
from runner.reasons import Reason, ReasonCode


class Keep(Enum):
    """A write method's argument left as it is in the row (the column is not written)."""

    KEEP = "keep"


KEEP = Keep.KEEP


class Tx:
    """One BEGIN IMMEDIATE … COMMIT, open while the ``with`` block of transaction() runs.

    ``_runs_written``: the names of the runs whose rows it wrote, or None when a statement
    may have written any (the store reads the queue again whole after it). A statement
    that writes ``runs`` says so where it is run (``run=`` the one run, or ``runs=True``):
    the store's cache of the queue goes by it (tests/unit/test_store_boundary.py finds
    every such statement saying it)."""

    __slots__ = ("_conn", "_notes", "_runs_written")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        # events a notification may follow, queued at COMMIT: (run, code, message, time,
        # the start forecast)
        self._notes: list[tuple[str, ReasonCode, Reason, float, StartForecast | None]] = []
        self._runs_written: set[str] | None = set()

    def _sql(
        self, statement: str, args: Iterable[Any] = (), *, run: str | None = None,
        runs: bool = False,
    ) -> sqlite3.Cursor:  # fmt: skip
        """For runner/store/ only: run one statement within this transaction. A write of
        ``runs`` names ``run``, the one run whose row it writes, or says ``runs`` (it may
        write any of them, or the table itself)."""
        self._wrote(run, runs)
        return self._conn.execute(statement, tuple(args))

    def _many(self, statement: str, rows: Iterable[Iterable[Any]], *, runs: bool = False) -> None:
        """For runner/store/ only: one statement for each of ``rows`` (executemany);
        ``runs``: it writes rows of ``runs`` (the queue is then read again whole)."""
        self._wrote(None, runs)
        self._conn.executemany(statement, (tuple(r) for r in rows))

    def _wrote(self, run: str | None, runs: bool) -> None:
        if runs:
            self._runs_written = None
        elif run is not None and self._runs_written is not None:
            self._runs_written.add(run)

    def _update(self, table: str, where: str, key: tuple[Any, ...], fields: dict[str, Any]) -> None:
        """For runner/store/ only: ``UPDATE table SET …`` of the fields not left as KEEP."""
        written = {k: v for k, v in fields.items() if v is not KEEP}
        if written:
            cols = ", ".join(f"{k} = ?" for k in written)
            one = str(key[0]) if table == "runs" and where == "name = ?" else None
            self._sql(
                f"UPDATE {table} SET {cols} WHERE {where}", (*written.values(), *key), run=one
            )
