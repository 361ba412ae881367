"""The machine's drains: the whole machine, or single GPUs.

A drain is durable: a restarted daemon keeps starting nothing where it was told to
(migration 10, table ``drains``).
"""

from __future__ import annotations

from runner.rows import DrainRow
from runner.store.core import Core
from runner.store.tx import Tx


class Drains:
    """Reads and writes of the ``drains`` table."""

    def __init__(self, core: Core) -> None:
        self._core = core

    def all(self) -> list[DrainRow]:
        sql = "SELECT target, reason, by_user, at FROM drains ORDER BY target"
        return [
            DrainRow(target=target, reason=reason, by=by, at=at)
            for target, reason, by, at in self._core.connect().execute(sql)
        ]

    def set(self, tx: Tx, target: str, reason: str, by: str, at: float) -> None:
        """Drain ``target`` (again: its reason, who and when replaced)."""
        tx._sql(
            "INSERT INTO drains (target, reason, by_user, at) VALUES (?,?,?,?)"
            " ON CONFLICT(target) DO UPDATE SET reason=excluded.reason,"
            " by_user=excluded.by_user, at=excluded.at",
            (target, reason, by, at),
        )

    def clear(self, tx: Tx, target: str) -> bool:
        """Resume ``target``; whether it was drained."""
        return tx._sql("DELETE FROM drains WHERE target = ?", (target,)).rowcount > 0
