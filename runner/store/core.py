"""The store's core: the SQLite file, a connection per thread, the one writer's lock,
transactions, and the generation that moves with every commit (the queue's cache goes by it).

Every repository of :class:`runner.store.db.Store` is given this core; nothing else in the
store opens a connection or a transaction. No connection is opened at import.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from runner.rows import RunRow
from runner.store.migrations import MIGRATIONS, SCHEMA_APPLICATION_ID
from runner.store.tx import Tx

# Each thread's connection keeps this much of the file in memory (SQLite's default: 2 MiB);
# the queue's reads are kept above it (Runs.all()), the rest of the file is in the OS's cache.
PAGE_CACHE_KIB = 512

WRITES_KEPT = 1024  # commits whose written runs are remembered (older: the queue read whole)


class StoreError(Exception):
    """The state database cannot be used; the message says why, in one line."""


class DiskFull(StoreError):
    """A write found no space (SQLITE_FULL): it was rolled back, nothing of it is kept.

    The API answers ``507 DISK_FULL`` (runner/api/app.py); the loop retries on its next tick.
    """


def _no_notices(tx: Tx) -> int:
    return 0


def _nobody() -> None:
    return None


class Core:
    """One SQLite file; one connection per thread, opened on first use."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        # One writer at a time in this process: threads queue here at once,
        # instead of in SQLite's busy handler, which sleeps between retries.
        self.writer = threading.Lock()
        # Bumped by every transaction that changed a row: the queue read last (Runs.all(),
        # active_only) is answered again while it stays the same. This process is its
        # file's one writer while the daemon runs (daemon.lock), every write a transaction.
        self.generation = 0
        self.active: tuple[int, list[RunRow]] | None = None  # the queue read last (Runs)
        # the runs each committed generation wrote (None: any); older ones are forgotten
        self._written: deque[tuple[int, frozenset[str] | None]] = deque()
        self._forgotten = 0  # the newest generation no longer in _written
        # just before a COMMIT whose events were noted: their notifications queued, how
        # many (the outbox's); after the commit, when some were: the sender woken
        self.queue_notices: Callable[[Tx], int] = _no_notices
        self.notices_queued: Callable[[], None] = _nobody
        self._check_and_migrate()

    def connect(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use."""
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
            version = self.connect().execute("PRAGMA user_version").fetchone()[0]
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
        conn = self.connect()
        with self.writer:
            try:
                before = conn.total_changes
                conn.execute("BEGIN IMMEDIATE")
                try:
                    tx = Tx(conn)
                    yield tx
                    queued = self.queue_notices(tx) if tx._notes else 0  # runner/store/outbox.py
                    conn.execute("COMMIT")
                    if conn.total_changes != before:
                        self._committed(tx._runs_written)
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                if queued:
                    self.notices_queued()
            except sqlite3.OperationalError as e:
                if getattr(e, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
                    raise DiskFull(
                        f"no space left for the state database {self.path}: nothing was "
                        "written; free some space and try again"
                    ) from e
                raise

    def _committed(self, runs: set[str] | None) -> None:
        """A transaction that changed rows committed (``runs``: the runs it wrote)."""
        self.generation += 1
        if runs is None or runs:
            self._written.append((self.generation, None if runs is None else frozenset(runs)))
            if len(self._written) > WRITES_KEPT:
                self._forgotten = self._written.popleft()[0]

    def written_since(self, generation: int) -> set[str] | None:
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

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


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
