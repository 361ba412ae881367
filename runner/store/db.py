"""Durable state in SQLite: runs, workers (one row per attempt), events, usage.

Every SQL statement is in runner/store/: this module (the connection, its checks and
transactions, the reads), writes.py (typed writes of runs and workers), groups.py and
forget.py. Outside it, a transaction is a :class:`runner.store.tx.Tx`, handed back to
the store's typed methods; no one else sees the connection.
A write that acknowledges something to a user (a submit, a delete, a priority
change) commits with ``synchronous=FULL`` before the caller answers. Every
decision is written before it is acted on: a worker row is ``Starting`` before
its container is created, ``Stopping`` before SIGTERM is sent. No connection is
opened at import.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from bisect import insort
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from runner.model import RunState, WorkerState, sql_list
from runner.reasons import Reason, ReasonCode, event_kind
from runner.rows import (
    EventRow,
    RunRow,
    UsageRecord,
    WorkerRow,
    is_run_uid,
    latest_workers,
    new_run_uid,
)
from runner.store.drains import DrainTables
from runner.store.forget import ForgetTables
from runner.store.groups import GroupTables
from runner.store.migrations import MIGRATIONS, SCHEMA_APPLICATION_ID
from runner.store.outbox import OutboxTables
from runner.store.rows import (
    _WORKERS,
    RUN_COLUMNS,
    RUN_TEMPLATE,
    _event,
    _worker,
    reason_json,
    run_from_tuple,
)
from runner.store.tx import Tx
from runner.store.usage import UsageTables
from runner.store.writes import RunWrites, WorkerWrites

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


# Each thread's connection keeps this much of the file in memory (SQLite's default: 2 MiB);
# the queue's reads are kept above it (runs()), the rest of the file is in the OS's cache.
PAGE_CACHE_KIB = 512


WRITES_KEPT = 1024  # commits whose written runs are remembered (older: the queue read whole)
REREAD_MAX = 500  # runs written since the last read, at most, read again one by one
_ACTIVE = sql_list(RunState.ACTIVE)


def _queue_order(run: RunRow) -> tuple[float, str]:
    return run.submitted_at, run.name  # as ORDER BY submitted_at, name (names are unique)


class StoreError(Exception):
    """The state database cannot be used; the message says why, in one line."""


class DiskFull(StoreError):
    """A write found no space (SQLITE_FULL): it was rolled back, nothing of it is kept.

    The API answers ``507 DISK_FULL`` (runner/api/app.py); the loop retries on its next tick.
    """


class NameInUse(Exception):
    pass


class Store(
    RunWrites, WorkerWrites, GroupTables, ForgetTables, DrainTables, UsageTables, OutboxTables
):
    """One SQLite file; one connection per thread, opened on first use."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        # One writer at a time in this process: threads queue here at once,
        # instead of in SQLite's busy handler, which sleeps between retries.
        self._writer = threading.Lock()
        self._templates = {}
        # Bumped by every transaction that changed a row: the queue read last (runs(),
        # active_only) is answered again while it stays the same. This process is its
        # file's one writer while the daemon runs (daemon.lock), every write a transaction.
        self._generation = 0
        self._active: tuple[int, list[RunRow]] | None = None
        # the runs each committed generation wrote (None: any); older ones are forgotten
        self._written: deque[tuple[int, frozenset[str] | None]] = deque()
        self._forgotten = 0  # the newest generation no longer in _written
        self._check_and_migrate()

    # ----------------------------------------------------------- plumbing

    def _connect(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")
            self._local.conn = conn
        return conn

    def _check_existing(self) -> None:
        """Refuse a file that is not a sound Astraeus database, without writing to it.

        Read-only (``mode=ro``: no journal switch, no checkpoint on close), through the WAL
        (after a crash the header on disk may not carry the application id yet): the
        application id, then ``PRAGMA quick_check`` for truncated or damaged pages.
        """
        keep = "refusing to touch it (move it away or set ASTRAEUS_HOME elsewhere)"
        try:
            conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, isolation_level=None)
        except sqlite3.Error as e:
            raise StoreError(f"{self.path} cannot be opened ({e}); {keep}") from e
        try:
            try:
                app_id = conn.execute("PRAGMA application_id").fetchone()[0]
                if app_id != SCHEMA_APPLICATION_ID:
                    raise StoreError(f"{self.path} is not an Astraeus state database; {keep}")
                problems = [str(r[0]) for r in conn.execute("PRAGMA quick_check")]
            except sqlite3.DatabaseError as e:
                if getattr(e, "sqlite_errorcode", None) != sqlite3.SQLITE_CORRUPT:
                    raise StoreError(
                        f"{self.path} is not an Astraeus state database ({e}); {keep}"
                    ) from e
                problems = [str(e)]  # a header that promises pages the file lacks
        finally:
            conn.close()
        if problems != ["ok"]:
            first = " ".join(problems[0].split())
            raise StoreError(
                f"{self.path} is damaged (truncated or corrupted: {first}); refusing to start on "
                "it and leaving it as it is: restore it from a backup, or move it away to start "
                "with an empty queue"
            )

    def _check_and_migrate(self) -> None:
        if self.path.exists() and self.path.stat().st_size > 0:
            self._check_existing()
        try:
            version = self._connect().execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path} cannot be used as the state database ({e})") from e
        if version > len(MIGRATIONS):
            raise StoreError(
                f"{self.path} was written by a newer Astraeus (schema {version}); upgrade first"
            )
        for number in range(version, len(MIGRATIONS)):
            with self.transaction() as tx:
                for statement in _statements(MIGRATIONS[number]):
                    tx._sql(statement, runs=True)  # a migration may change any table
                tx._sql(f"PRAGMA user_version = {number + 1}")
                tx._sql(f"PRAGMA application_id = {SCHEMA_APPLICATION_ID}")

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        """BEGIN IMMEDIATE … COMMIT; rolled back on any exception (a failed COMMIT too).

        SQLite may have rolled back by itself (disk full): then there is nothing to roll
        back, and the error that caused it is the one raised. A full disk is DiskFull.
        """
        conn = self._connect()
        with self._writer:
            try:
                before = conn.total_changes
                conn.execute("BEGIN IMMEDIATE")
                try:
                    tx = Tx(conn)
                    yield tx
                    queued = self._queue_notices(tx) if tx._notes else 0  # runner/store/outbox.py
                    conn.execute("COMMIT")
                    if conn.total_changes != before:
                        self._committed(tx._runs_written)
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                if queued and self.outbox_listener is not None:
                    self.outbox_listener()
            except sqlite3.OperationalError as e:
                if getattr(e, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
                    raise DiskFull(
                        f"no space left for the state database {self.path}: nothing was "
                        "written; free some space and try again"
                    ) from e
                raise

    def _committed(self, runs: set[str] | None) -> None:
        """A transaction that changed rows committed (``runs``: the runs it wrote)."""
        self._generation += 1
        if runs is None or runs:
            self._written.append((self._generation, None if runs is None else frozenset(runs)))
            if len(self._written) > WRITES_KEPT:
                self._forgotten = self._written.popleft()[0]

    def _written_since(self, generation: int) -> set[str] | None:
        """The runs written after ``generation``; None: any may have been."""
        if generation < self._forgotten:
            return None
        names: set[str] = set()
        for at, runs in reversed(self._written):  # newest first: stop at the first seen
            if at <= generation:
                break
            if runs is None:
                return None
            names |= runs
        return names

    @property
    def generation(self) -> int:
        """Moves with every committed transaction that changed a row (this process's)."""
        return self._generation

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # --------------------------------------------------------------- runs

    def _read_runs(self, where: str = "", args: tuple[Any, ...] = ()) -> list[RunRow]:
        """``SELECT`` of runs by position (plain tuples: the queue's reads are thousands)."""
        cursor = self._connect().cursor()
        cursor.row_factory = None
        template = self.template_doc
        return [
            run_from_tuple(r, None if r[RUN_TEMPLATE] is None else template(r[RUN_TEMPLATE]))
            for r in cursor.execute(f"SELECT {RUN_COLUMNS} FROM runs {where}", args)
        ]

    def insert_run(self, run: RunRow) -> None:
        """Acknowledge a submit: committed when this returns. NameInUse on a clash."""
        with self.transaction() as tx:
            self.insert_run_in(tx, run, f"Submitted by {run.owner}")

    def insert_run_in(self, tx: Tx, run: RunRow, message: str | Reason) -> None:
        """Insert within ``tx``; NameInUse (the whole transaction rolls back) on a clash."""
        try:
            tx._sql(
                "INSERT INTO runs (name, workspace, owner, uid, gid, spec, priority, state,"
                " reason, submitted_at, grp, run_uid, template, held_by)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    run.name,
                    run.workspace,
                    run.owner,
                    run.uid,
                    run.gid,
                    run.spec_text,
                    run.priority,
                    run.state,
                    reason_json(run.reason),
                    run.submitted_at,
                    run.grp,
                    run.run_uid or new_run_uid(run.submitted_at),
                    run.template,
                    run.held_by,
                ),
                run=run.name,
            )
        except sqlite3.IntegrityError as e:
            raise NameInUse(run.name) from e
        why = message if isinstance(message, Reason) else Reason(message, code=ReasonCode.MESSAGE)
        self.add_event(tx, run.name, run.workspace, ReasonCode.SUBMITTED, why, run.submitted_at)

    def get_run(self, name: str) -> RunRow | None:
        found = self._read_runs("WHERE name = ?", (name,))
        return found[0] if found else None

    def runs(self, *, active_only: bool = False) -> list[RunRow]:
        """Every run (``active_only``: not finished), by submit time then name.

        The active runs last read are kept: after a commit only the rows it wrote are read
        again (the whole queue when a statement may have written any). The loop, the list
        and the estimates read the same queue, thousands of rows."""
        if not active_only:
            return self._read_runs("ORDER BY submitted_at, name")
        where = f"WHERE state IN {_ACTIVE}"
        if self._connect().in_transaction:  # its own writes, not committed: never kept
            return self._read_runs(where + " ORDER BY submitted_at, name")
        with self._writer:  # no commit between the generation and the rows read
            generation, cached = self._generation, self._active
            if cached is not None and cached[0] == generation:
                return list(cached[1])
            written = None if cached is None else self._written_since(cached[0])
            if cached is not None and written is not None and len(written) <= REREAD_MAX:
                rows = self._merged(cached[1], written, where)
                self._active = (generation, rows)
                return list(rows)
        generation = self._generation  # read whole, outside the lock: one SELECT
        rows = self._read_runs(where + " ORDER BY submitted_at, name")
        self._active = (generation, rows)  # read after ``generation``: at least as new
        return list(rows)

    def _merged(self, rows: list[RunRow], written: set[str], where: str) -> list[RunRow]:
        """``rows`` with the runs ``written`` read again (gone when no longer active)."""
        if not written:
            return rows
        fresh = self._read_runs(f"{where} AND name IN ({','.join('?' * len(written))})",
                                tuple(written))  # fmt: skip
        merged = [r for r in rows if r.name not in written]
        for run in fresh:  # a few rows into thousands in order: placed, not sorted again
            insort(merged, run, key=_queue_order)
        return merged

    def runs_to_settle(self) -> list[RunRow]:
        """Runs with workers, or a stop asked for: the only ones whose state may move."""
        sql = (
            f"SELECT * FROM runs WHERE state IN {sql_list(RunState.LIVE)}"
            " OR (state = 'Queued' AND stop_request IS NOT NULL)"
        )
        return self._read_runs(sql.removeprefix("SELECT * FROM runs "))

    def delete_run_row(self, tx: Tx, name: str) -> None:
        """Forget a run: its row, workers and events; its files are noted for the loop to
        remove (see runner/store/forget.py). Its usage stays."""
        self.note_forgotten(tx, name)
        row = tx._sql("SELECT template, run_uid FROM runs WHERE name = ?", (name,)).fetchone()
        if row is not None and row[1]:
            self.usage_forgotten(tx, row[1])
        tx._sql("DELETE FROM events WHERE run = ? AND grp IS NULL", (name,))
        tx._sql("DELETE FROM runs WHERE name = ?", (name,), run=name)
        if row is not None and row[0] is not None:
            self.drop_template_if_unused(tx, row[0])

    def unfinished_runs_of(self, tx: Tx, uid: int) -> int:
        """How many runs of ``uid`` are not finished (Queued, Starting, Running, Stopping)."""
        # by the state's index (the queue), not the owner's (every run they ever had)
        sql = f"SELECT COUNT(*) FROM runs WHERE +uid = ? AND state IN {sql_list(RunState.ACTIVE)}"
        count: int = tx._sql(sql, (uid,)).fetchone()[0]
        return count

    def runs_of_group(self, grp: str) -> list[RunRow]:
        return self._read_runs("WHERE grp = ? ORDER BY submitted_at, name", (grp,))

    def run_states(self, names: Iterable[str]) -> dict[str, tuple[str, str]]:
        """Each named run's (state, workspace); runs that do not exist are left out."""
        wanted = sorted(set(names))
        out: dict[str, tuple[str, str]] = {}
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT name, state, workspace FROM runs WHERE name IN ({marks})"
            out.update({r[0]: (r[1], r[2]) for r in self._connect().execute(sql, chunk)})
        return out

    # ------------------------------------------------------------ workers

    def insert_worker(
        self, tx: Tx, run: str, attempt: int, worker: int,
        gpus: tuple[int, ...], cpu_milli: int, memory: int, now: float,
        mono: float | None = None, boot: str | None = None, executor: str | None = None,
    ) -> None:  # fmt: skip
        tx._sql(
            "INSERT INTO workers (run, attempt, worker, state, gpus, cpu_milli, memory,"
            " started_at, started_mono, boot_id, executor)"
            " VALUES (?,?,?,'Starting',?,?,?,?,?,?,?)",
            (
                run,
                attempt,
                worker,
                json.dumps(list(gpus)),
                cpu_milli,
                memory,
                now,
                mono,
                boot,
                executor,
            ),
        )

    def live_workers(self) -> list[WorkerRow]:
        sql = f"{_WORKERS} WHERE w.state IN {sql_list(WorkerState.LIVE)} ORDER BY w.run, w.worker"
        return [_worker(r) for r in self._connect().execute(sql)]

    def workers_of(self, run: str) -> list[WorkerRow]:
        sql = f"{_WORKERS} WHERE w.run = ? ORDER BY w.attempt, w.worker"
        return [_worker(r) for r in self._connect().execute(sql, (run,))]

    # ---------------------------------------------------- events and usage

    def add_event(
        self, tx: Tx, run: str, workspace: str, code: ReasonCode, message: Reason,
        now: float | None = None, grp: str | None = None,
    ) -> None:  # fmt: skip
        """An event of a run; of a group when ``grp`` is given (``run`` then names the group).

        ``code`` says what happened; the kind people read is its name (``event_kind``)."""
        if grp is None:
            self._note_event(tx, run, code, message, time.time() if now is None else now)
        tx._sql(
            "INSERT INTO events (run, workspace, time, kind, message, grp, code)"
            " VALUES (?,?,?,?,?,?,?)",
            (
                run,
                workspace,
                time.time() if now is None else now,
                event_kind(code),
                reason_json(message),
                grp,
                code.value,
            ),
        )

    def events(
        self, run: str | None = None, *, after: int = 0, grp: str | None = None
    ) -> list[EventRow]:
        sql, args = "SELECT * FROM events WHERE id > ?", [after]
        if run is not None:
            sql += " AND run = ? AND grp IS NULL"
            args.append(run)  # type: ignore[arg-type]  # mixed int/str parameters
        if grp is not None:
            sql += " AND grp = ? AND run = grp"
            args.append(grp)  # type: ignore[arg-type]  # mixed int/str parameters
        rows = self._connect().execute(sql + " ORDER BY id", args)
        return [_event(r) for r in rows]

    def add_usage(self, tx: Tx, run: RunRow, gpu_s: float, cpu_s: float) -> None:
        """Add to the run's usage, kept by its id: it outlives the run being forgotten."""
        tx._sql(
            "INSERT INTO usage (run_uid, run, workspace, gpu_seconds, cpu_seconds)"
            " VALUES (?,?,?,?,?) ON CONFLICT (run_uid) DO UPDATE SET"
            " gpu_seconds = gpu_seconds + ?, cpu_seconds = cpu_seconds + ?",
            (run.run_uid, run.name, run.workspace, gpu_s, cpu_s, gpu_s, cpu_s),
        )

    def usage_by_workspace(self) -> dict[str, tuple[float, float]]:
        rows = self._connect().execute(
            "SELECT workspace, SUM(gpu_seconds), SUM(cpu_seconds) FROM usage GROUP BY workspace"
        )
        return {r[0]: (r[1], r[2]) for r in rows}


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


def _statements(script: str) -> list[str]:
    """The statements of a migration, each whole (a trigger's body holds semicolons)."""
    found, pending = [], ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                found.append(pending)
            pending = ""
    return found
