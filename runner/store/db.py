"""Durable state in SQLite: runs, workers (one row per attempt), events, usage.

Every SQL statement is in runner/store/. :class:`Store` owns one core (runner/store/core.py:
the connection of each thread, the one writer's lock, transactions, the generation) and
gives it to its repositories, one per family of tables: ``runs``, ``workers``, ``events``,
``groups``, ``templates``, ``drains``, ``usage``, ``forget`` and ``outbox``
(``store.runs.get(name)``, ``store.events.add(tx, …)``). Outside the store, a transaction
is a :class:`runner.store.tx.Tx`, handed back to the repositories' typed methods; no one
else sees the connection.
A write that acknowledges something to a user (a submit, a delete, a priority
change) commits with ``synchronous=FULL`` before the caller answers. Every
decision is written before it is acted on: a worker row is ``Starting`` before
its container is created, ``Stopping`` before SIGTERM is sent. No connection is
opened at import.
"""

from __future__ import annotations

import sqlite3
from contextlib import AbstractContextManager
from pathlib import Path

from runner.rows import (
    EventRow,
    RunRow,
    UsageRecord,
    WorkerRow,
    is_run_uid,
    latest_workers,
    new_run_uid,
)
from runner.store.core import Core, DiskFull, StoreError
from runner.store.drains import Drains
from runner.store.events import Events
from runner.store.forget import Forget
from runner.store.groups import Groups
from runner.store.migrations import MIGRATIONS, SCHEMA_APPLICATION_ID
from runner.store.outbox import Outbox
from runner.store.rows import reason_json
from runner.store.runs import NameInUse, Runs
from runner.store.templates import Templates
from runner.store.tx import Tx
from runner.store.usage import Usage
from runner.store.workers import Workers

__all__ = [
    "MIGRATIONS",
    "SCHEMA_APPLICATION_ID",
    "DiskFull",
    "EventRow",
    "NameInUse",
    "RunRow",
    "Store",
    "StoreError",
    "UsageRecord",
    "WorkerRow",
    "is_run_uid",
    "latest_workers",
    "new_run_uid",
    "reason_json",
]


class Store:
    """One SQLite file, its core and its repositories (each given what it reads)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._core = core = Core(path)
        self.templates = Templates(core)
        self.events = Events(core)
        self.usage = Usage(core)
        self.runs = Runs(core, self.events, self.templates, self.usage)
        self.workers = Workers(core)
        self.groups = Groups(core, self.templates)
        self.drains = Drains(core)
        self.forget = Forget(core, self.runs)
        self.outbox = Outbox(core, self.events, self.templates)
        core.queue_notices, core.notices_queued = self.outbox.queue, self.outbox.wake

    def transaction(self) -> AbstractContextManager[Tx]:
        """BEGIN IMMEDIATE … COMMIT; rolled back on any exception (a failed COMMIT too).

        A full disk is DiskFull (nothing of the transaction is kept)."""
        return self._core.transaction()

    @property
    def generation(self) -> int:
        """Moves with every committed transaction that changed a row (this process's)."""
        return self._core.generation

    def _connect(self) -> sqlite3.Connection:
        """For runner/store/ only (telemetry, counts): this thread's connection."""
        return self._core.connect()

    def close(self) -> None:
        self._core.close()


def read_only_run_count(path: Path) -> int:
    """How many runs the state database at ``path`` holds, read without writing to it.

    StoreError, with SQLite's own message, when it cannot be read.
    """
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=2)
        try:
            runs: int = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error as e:
        raise StoreError(str(e)) from e
    return runs
