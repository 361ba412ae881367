"""The machine's drains (whole machine, or single GPUs) and a run's edited spec.

Mixed into :class:`runner.store.db.Store`. A drain is durable: a restarted daemon keeps
starting nothing where it was told to (migration 10, table ``drains``).
"""

from __future__ import annotations

import sqlite3

from runner.rows import DrainRow
from runner.store.tx import Tx


class DrainTables:
    """Reads and writes of the ``drains`` table, and of a run's edited spec."""

    def _connect(self) -> sqlite3.Connection:
        raise NotImplementedError

    def drop_template_if_unused(self, tx: Tx, template: int) -> None:
        raise NotImplementedError

    def drains(self) -> list[DrainRow]:
        sql = "SELECT target, reason, by_user, at FROM drains ORDER BY target"
        return [
            DrainRow(target=target, reason=reason, by=by, at=at)
            for target, reason, by, at in self._connect().execute(sql)
        ]

    def set_drain(self, tx: Tx, target: str, reason: str, by: str, at: float) -> None:
        """Drain ``target`` (again: its reason, who and when replaced)."""
        tx._sql(
            "INSERT INTO drains (target, reason, by_user, at) VALUES (?,?,?,?)"
            " ON CONFLICT(target) DO UPDATE SET reason=excluded.reason,"
            " by_user=excluded.by_user, at=excluded.at",
            (target, reason, by, at),
        )

    def clear_drain(self, tx: Tx, target: str) -> bool:
        """Resume ``target``; whether it was drained."""
        return tx._sql("DELETE FROM drains WHERE target = ?", (target,)).rowcount > 0

    def set_spec(self, tx: Tx, name: str, spec_text: str, priority: int) -> None:
        """A waiting run edited (or a running one's time limit): its whole spec document,
        no longer read through a group's template, and its priority."""
        row = tx._sql("SELECT template FROM runs WHERE name = ?", (name,)).fetchone()
        tx._sql(
            "UPDATE runs SET spec = ?, priority = ?, template = NULL WHERE name = ?",
            (spec_text, priority, name),
            run=name,
        )
        if row is not None and row[0] is not None:
            self.drop_template_if_unused(tx, row[0])
