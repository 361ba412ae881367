"""The groups table: sweeps, replica groups and schedules (see runner/groups.py).

A group's runs are ordinary rows of ``runs`` with ``grp`` set to the group's name;
a group's own events are rows of ``events`` with ``grp`` set (and ``run`` = its name).
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class GroupRow:
    name: str
    kind: str  # sweep | replicas | schedule
    workspace: str
    owner: str
    uid: int
    gid: int
    spec_text: str  # the group document as JSON, its run template included
    created_at: float
    replicas: int = 0  # replicas: how many are wanted
    paused: bool = False  # schedules
    next_at: float | None = None  # schedules: the next firing
    last_fired_at: float | None = None

    def document(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.spec_text)
        return value


def _group(row: sqlite3.Row) -> GroupRow:
    return GroupRow(
        row["name"], row["kind"], row["workspace"], row["owner"], row["uid"], row["gid"],
        row["spec"], row["created_at"], row["replicas"], bool(row["paused"]), row["next_at"],
        row["last_fired_at"],
    )  # fmt: skip


class GroupTables:
    """Mixed into :class:`runner.store.Store`, which provides the connection."""

    def _connect(self) -> sqlite3.Connection:
        raise NotImplementedError

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def insert_group_in(self, tx: sqlite3.Connection, g: GroupRow) -> bool:
        """False when a group of that name exists (nothing written)."""
        try:
            tx.execute(
                "INSERT INTO groups (name, kind, workspace, owner, uid, gid, spec, created_at,"
                " replicas, paused, next_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    g.name, g.kind, g.workspace, g.owner, g.uid, g.gid, g.spec_text,
                    g.created_at, g.replicas, int(g.paused), g.next_at,
                ),
            )  # fmt: skip
        except sqlite3.IntegrityError:
            return False
        return True

    def get_group(self, name: str) -> GroupRow | None:
        row = self._connect().execute("SELECT * FROM groups WHERE name = ?", (name,)).fetchone()
        return None if row is None else _group(row)

    def groups(self, kind: str | None = None) -> list[GroupRow]:
        sql, args = "SELECT * FROM groups", []
        if kind is not None:
            sql, args = sql + " WHERE kind = ?", [kind]
        return [_group(r) for r in self._connect().execute(sql + " ORDER BY created_at", args)]

    def update_group(self, tx: sqlite3.Connection, name: str, **fields: Any) -> None:
        cols = ", ".join(f"{k} = ?" for k in fields)
        tx.execute(f"UPDATE groups SET {cols} WHERE name = ?", (*fields.values(), name))

    def delete_group_row(self, tx: sqlite3.Connection, name: str) -> None:
        tx.execute("DELETE FROM events WHERE grp = ? AND run = grp", (name,))
        tx.execute("DELETE FROM groups WHERE name = ?", (name,))
