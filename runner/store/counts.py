"""Counts of the events table, for ``GET /metrics``: how many events of each code, by workspace.

Read forward only (events past an id), so that the caller can keep running totals: a
run's events go when the run is deleted or forgotten, and a counter must never go back.
SQLite gives a new row the id after the largest one left: when the newest events went with
their run, the ids after the caller's mark are given again, and the events written under it
before the next read are not counted (an undercount, never a count going back).
"""

from __future__ import annotations

from collections.abc import Iterable

from runner.reasons import ReasonCode
from runner.store.db import Store

__all__ = ["event_counts_since"]


def event_counts_since(
    store: Store, after: int, codes: Iterable[ReasonCode]
) -> tuple[int, dict[tuple[ReasonCode, str], int]]:
    """The newest event's id, and the runs' events after ``after`` up to it, of ``codes``,
    counted by (code, workspace). Groups' events are not counted."""
    wanted = tuple(c.value for c in codes)
    conn = store._connect()
    newest = conn.execute("SELECT COALESCE(MAX(id), 0) FROM events").fetchone()[0]
    if newest <= after or not wanted:  # below: the newest events went with their run
        return newest, {}
    sql = (
        "SELECT code, workspace, COUNT(*) FROM events WHERE id > ? AND id <= ?"
        f" AND grp IS NULL AND code IN ({','.join('?' * len(wanted))}) GROUP BY code, workspace"
    )
    rows = conn.execute(sql, (after, newest, *wanted))
    return newest, {(ReasonCode(code), ws): n for code, ws, n in rows}
