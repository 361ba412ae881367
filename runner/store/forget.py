"""Forgetting runs: the files they leave, and the finished runs kept too long.

A run forgotten (``astra delete`` of a finished run, its group deleted, or its retention
time over) loses its row in the same transaction that notes its id, and the handles of
its workers, in ``forgotten`` (``Runs.delete``). The loop then removes its files (its log
folder, any worker folder or container left) and the note (runner/engine/retention.py):
written before acted on, so a daemon that dies in between finishes the job after its
restart.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from runner.model import RunState, WorkerState, sql_list
from runner.store.core import Core
from runner.store.tx import Tx

if TYPE_CHECKING:
    from runner.store.runs import Runs

_EXPIRED = (
    f"finished_at < ? AND state IN {sql_list(RunState.FINISHED)}"
    " AND name NOT IN (SELECT value FROM json_each(?))"
    " AND NOT EXISTS (SELECT 1 FROM workers w WHERE w.run = r.name"
    f" AND w.state IN {sql_list(WorkerState.LIVE)})"
)


@dataclass(frozen=True, slots=True)
class Forgotten:
    run_uid: str
    handles: tuple[str, ...]  # the executor's handles of its workers, maybe left behind


class Forget:
    """The runs to forget (expired, or past what their user may keep), and the files of
    those forgotten (``forgotten``), still to be removed."""

    def __init__(self, core: Core, runs: Runs) -> None:
        self._core = core
        self._runs = runs

    def pending(self, limit: int) -> list[Forgotten]:
        """The oldest ``limit`` forgotten runs whose files are still to be removed."""
        sql = "SELECT run_uid, handles FROM forgotten ORDER BY time, run_uid LIMIT ?"
        return [
            Forgotten(run_uid=str(uid), handles=tuple(str(h) for h in json.loads(handles)))
            for uid, handles in self._core.connect().execute(sql, (limit,))
        ]

    def files_removed(self, run_uid: str) -> None:
        with self._core.transaction() as tx:
            tx._sql("DELETE FROM forgotten WHERE run_uid = ?", (run_uid,))

    def run_uids(self) -> dict[str, str]:
        """Every run's id and name, and every forgotten run's id (name ``""``)."""
        conn = self._core.connect()
        found = {str(u): str(n) for u, n in conn.execute("SELECT run_uid, name FROM runs")}
        for (uid,) in conn.execute("SELECT run_uid FROM forgotten"):
            found.setdefault(str(uid), "")
        return found

    def expired(self, before: float, limit: int, keep: Collection[str]) -> list[str]:
        """Names of finished runs with no live worker that finished before ``before``,
        oldest first, but for those in ``keep``."""
        sql = f"SELECT name FROM runs r WHERE {_EXPIRED} ORDER BY finished_at, name LIMIT ?"
        args = (before, json.dumps(sorted(keep)), limit)
        return [str(n) for (n,) in self._core.connect().execute(sql, args)]

    def over_kept(self, most: int, most_bytes: int, keep: Collection[str], limit: int) -> list[str]:
        """Names of finished runs (no live worker, not in ``keep``) past what their user
        may keep: beyond the newest ``most`` of theirs, or once the bytes of their stored
        specs, newest first, pass ``most_bytes``; oldest first, at most ``limit``."""
        conn = self._core.connect()
        finished = f"state IN {sql_list(RunState.FINISHED)}"
        heavy = conn.execute(
            f"SELECT uid FROM runs WHERE {finished} GROUP BY uid"
            " HAVING COUNT(*) > ? OR SUM(spec_bytes) > ?",
            (most, most_bytes),
        ).fetchall()
        found: list[tuple[float, str]] = []
        for (uid,) in heavy:
            rows = conn.execute(
                f"SELECT name, finished_at, spec_bytes FROM runs r WHERE uid IS ? AND"
                f" {_EXPIRED} ORDER BY finished_at DESC, name DESC",
                (uid, float("inf"), json.dumps(sorted(keep))),
            )
            count = total = 0
            for name, finished_at, size in rows:
                count, total = count + 1, total + int(size)
                if count > most or total > most_bytes:
                    found.append((float(finished_at), str(name)))
        return [name for _, name in sorted(found)[:limit]]

    def if_expired(self, tx: Tx, name: str, before: float) -> bool:
        """Within ``tx``: forget run ``name`` if it is still one of expired()."""
        sql = f"SELECT 1 FROM runs r WHERE name = ? AND {_EXPIRED}"
        if tx._sql(sql, (name, before, "[]")).fetchone() is None:
            return False
        self._runs.delete(tx, name)
        return True
