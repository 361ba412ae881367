"""The groups table: sweeps, replica groups and schedules (see runner/runspec/groups.py).

A group's runs are ordinary rows of ``runs`` with ``grp`` set to the group's name;
a group's own events are rows of ``events`` with ``grp`` set (and ``run`` = its name).
"""

from __future__ import annotations

import sqlite3

from runner.rows import GroupRow
from runner.store.core import Core
from runner.store.rows import from_columns
from runner.store.templates import Templates
from runner.store.tx import Tx


def _group(row: sqlite3.Row) -> GroupRow:
    return from_columns(GroupRow, row, spec_text=row["spec"], paused=bool(row["paused"]))


class Groups:
    """Reads and writes of ``groups`` (a group's template is dropped with it)."""

    def __init__(self, core: Core, templates: Templates) -> None:
        self._core = core
        self._templates = templates

    def insert(self, tx: Tx, g: GroupRow) -> bool:
        """False when a group of that name exists (nothing written)."""
        try:
            tx._sql(
                "INSERT INTO groups (name, kind, workspace, owner, uid, gid, spec, created_at,"
                " replicas, paused, next_at, template) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    g.name,
                    g.kind,
                    g.workspace,
                    g.owner,
                    g.uid,
                    g.gid,
                    g.spec_text,
                    g.created_at,
                    g.replicas,
                    int(g.paused),
                    g.next_at,
                    g.template,
                ),
            )
        except sqlite3.IntegrityError:
            return False
        return True

    def get(self, name: str) -> GroupRow | None:
        row = (
            self._core.connect().execute("SELECT * FROM groups WHERE name = ?", (name,)).fetchone()
        )
        return None if row is None else _group(row)

    def all(self, kind: str | None = None) -> list[GroupRow]:
        sql, args = "SELECT * FROM groups", []
        if kind is not None:
            sql, args = sql + " WHERE kind = ?", [kind]
        return [_group(r) for r in self._core.connect().execute(sql + " ORDER BY created_at", args)]

    def set_replicas(self, tx: Tx, name: str, replicas: int) -> None:
        tx._sql("UPDATE groups SET replicas = ? WHERE name = ?", (replicas, name))

    def set_paused(self, tx: Tx, name: str, paused: bool, next_at: float | None) -> None:
        """A schedule paused or resumed; it fires next at ``next_at``."""
        sql = "UPDATE groups SET paused = ?, next_at = ? WHERE name = ?"
        tx._sql(sql, (int(paused), next_at, name))

    def schedule_fired(self, tx: Tx, name: str, next_at: float | None, fired_at: float) -> None:
        """A schedule fired at ``fired_at``; it fires next at ``next_at`` (None: never)."""
        sql = "UPDATE groups SET next_at = ?, last_fired_at = ? WHERE name = ?"
        tx._sql(sql, (next_at, fired_at, name))

    def created_at(self, tx: Tx, name: str) -> float | None:
        """Within ``tx``: when group ``name`` was made; None if there is none."""
        row = tx._sql("SELECT created_at FROM groups WHERE name = ?", (name,)).fetchone()
        return None if row is None else float(row[0])

    def release_runs(self, tx: Tx, name: str) -> None:
        """The group's runs belong to it no more (its name is free to be used again)."""
        tx._sql("UPDATE runs SET grp = NULL WHERE grp = ?", (name,), runs=True)

    def delete(self, tx: Tx, name: str) -> None:
        row = tx._sql("SELECT template FROM groups WHERE name = ?", (name,)).fetchone()
        tx._sql("DELETE FROM events WHERE grp = ? AND run = grp", (name,))
        tx._sql("DELETE FROM groups WHERE name = ?", (name,))
        if row is not None and row[0] is not None:
            self._templates.drop_if_unused(tx, row[0])
