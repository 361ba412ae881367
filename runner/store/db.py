"""Durable state in SQLite: runs, workers (one row per attempt), events, usage.

The only module that writes SQL (with ``runner/store/groups.py``, the groups' tables).
A write that acknowledges something to a user (a submit, a delete, a priority
change) commits with ``synchronous=FULL`` before the caller answers. Every
decision is written before it is acted on: a worker row is ``Starting`` before
its container is created, ``Stopping`` before SIGTERM is sent. No connection is
opened at import.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.model import Reason, ReasonCode, RunRef, event_code
from runner.spec.templates import run_document
from runner.store.forget import ForgetTables
from runner.store.groups import GroupTables

SCHEMA_APPLICATION_ID = 0x41535452  # "ASTR": refuses to open a foreign database

MIGRATIONS: tuple[str, ...] = (
    # 1: runs, workers, events, usage
    """
    CREATE TABLE runs (
        name TEXT PRIMARY KEY,
        workspace TEXT NOT NULL,
        owner TEXT NOT NULL,
        uid INTEGER NOT NULL,
        gid INTEGER NOT NULL,
        spec TEXT NOT NULL,
        priority INTEGER NOT NULL,
        state TEXT NOT NULL,
        reason TEXT,
        submitted_at REAL NOT NULL,
        started_at REAL,
        finished_at REAL,
        exit_code INTEGER,
        restarts INTEGER NOT NULL DEFAULT 0,
        preemptions INTEGER NOT NULL DEFAULT 0,
        attempts INTEGER NOT NULL DEFAULT 0,
        preempted_by TEXT,
        stop_request TEXT,
        quota_noted INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX runs_state ON runs(state);
    CREATE TABLE workers (
        id INTEGER PRIMARY KEY,
        run TEXT NOT NULL REFERENCES runs(name) ON DELETE CASCADE,
        attempt INTEGER NOT NULL,
        worker INTEGER NOT NULL,
        state TEXT NOT NULL,
        handle TEXT,
        gpus TEXT NOT NULL,
        cpu_milli INTEGER NOT NULL,
        memory INTEGER NOT NULL,
        started_at REAL NOT NULL,
        stop_reason TEXT,
        stop_deadline REAL,
        stopping_for TEXT,
        killed INTEGER NOT NULL DEFAULT 0,
        exit_code INTEGER,
        error TEXT,
        finished_at REAL,
        UNIQUE (run, attempt, worker)
    );
    CREATE INDEX workers_live ON workers(state);
    CREATE TABLE events (
        id INTEGER PRIMARY KEY,
        run TEXT NOT NULL,
        workspace TEXT NOT NULL,
        time REAL NOT NULL,
        kind TEXT NOT NULL,
        message TEXT NOT NULL
    );
    CREATE INDEX events_run ON events(run, id);
    CREATE TABLE usage (
        run TEXT NOT NULL,
        workspace TEXT NOT NULL,
        gpu_seconds REAL NOT NULL DEFAULT 0,
        cpu_seconds REAL NOT NULL DEFAULT 0,
        PRIMARY KEY (run, workspace)
    );
    """,
    # 2: groups of runs made from one template (sweeps, replica groups, schedules)
    """
    CREATE TABLE groups (
        name TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        workspace TEXT NOT NULL,
        owner TEXT NOT NULL,
        uid INTEGER NOT NULL,
        gid INTEGER NOT NULL,
        spec TEXT NOT NULL,
        created_at REAL NOT NULL,
        replicas INTEGER NOT NULL DEFAULT 0,
        paused INTEGER NOT NULL DEFAULT 0,
        next_at REAL,
        last_fired_at REAL
    );
    ALTER TABLE runs ADD COLUMN grp TEXT;
    ALTER TABLE runs ADD COLUMN streak INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX runs_grp ON runs(grp);
    ALTER TABLE events ADD COLUMN grp TEXT;
    CREATE INDEX events_grp ON events(grp, id);
    """,
    # 3: a run's dependencies, once all succeeded, are not looked at again
    """
    ALTER TABLE runs ADD COLUMN deps_met INTEGER NOT NULL DEFAULT 0;
    """,
    # 4: every run has an immutable unique id (its files on disk are named by it); the
    # files of forgotten runs wait in ``forgotten`` to be removed; usage is kept per run
    # id, so a name used again never merges with the usage of the run it had before
    """
    ALTER TABLE runs ADD COLUMN run_uid TEXT;
    UPDATE runs SET run_uid = printf('%012x', CAST(submitted_at * 1000 AS INTEGER))
        || lower(hex(randomblob(10)));
    CREATE UNIQUE INDEX runs_run_uid ON runs(run_uid);
    CREATE INDEX runs_finished ON runs(finished_at);
    CREATE TABLE forgotten (
        run_uid TEXT PRIMARY KEY,
        handles TEXT NOT NULL,
        time REAL NOT NULL
    );
    CREATE TABLE usage_by_run (
        run_uid TEXT PRIMARY KEY,
        run TEXT NOT NULL,
        workspace TEXT NOT NULL,
        gpu_seconds REAL NOT NULL DEFAULT 0,
        cpu_seconds REAL NOT NULL DEFAULT 0
    );
    INSERT INTO usage_by_run (run_uid, run, workspace, gpu_seconds, cpu_seconds)
        SELECT COALESCE(r.run_uid, lower(hex(randomblob(16)))), u.run, u.workspace,
               u.gpu_seconds, u.cpu_seconds
        FROM usage u LEFT JOIN runs r ON r.name = u.run AND r.workspace = u.workspace;
    DROP TABLE usage;
    ALTER TABLE usage_by_run RENAME TO usage;
    CREATE INDEX usage_workspace ON usage(workspace);
    """,
    # 5: monotonic readings of a worker's start and stop deadline, and the boot they count
    # from (runner/clock.py): time limits and graces are measured on them, not on the wall
    """
    ALTER TABLE workers ADD COLUMN started_mono REAL;
    ALTER TABLE workers ADD COLUMN stop_deadline_mono REAL;
    ALTER TABLE workers ADD COLUMN boot_id TEXT;
    """,
    # 6: a group's run template stored once; its runs keep only their own part
    # (runner/spec/templates.py). AUTOINCREMENT: an id is never used twice (it is cached).
    """
    CREATE TABLE templates (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        spec TEXT NOT NULL
    );
    ALTER TABLE runs ADD COLUMN template INTEGER REFERENCES templates(id);
    CREATE INDEX runs_template ON runs(template);
    ALTER TABLE groups ADD COLUMN template INTEGER REFERENCES templates(id);
    """,
    # 7: the executor that started each worker ("docker", "process"); NULL on older rows
    """
    ALTER TABLE workers ADD COLUMN executor TEXT;
    """,
    # 8: each event's code (runner.model.ReasonCode), older rows' from their kind; whether
    # each run's latest attempt was started by backfill, older runs' from their last start
    """
    ALTER TABLE runs ADD COLUMN backfilled INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE events ADD COLUMN code TEXT NOT NULL DEFAULT 'LEGACY';
    UPDATE events SET code = CASE kind
        WHEN 'Started' THEN CASE WHEN json_extract(message, '$.template') LIKE 'Backfilled%'
                                 THEN 'BACKFILLED' ELSE 'STARTED' END
        WHEN 'Submitted' THEN 'SUBMITTED' WHEN 'Priority' THEN 'PRIORITY_CHANGED'
        WHEN 'QuotaReached' THEN 'QUOTA_REACHED' WHEN 'Preempting' THEN 'PREEMPTING'
        WHEN 'Preempted' THEN 'PREEMPTED' WHEN 'PreemptionWithdrawn' THEN 'PREEMPTION_WITHDRAWN'
        WHEN 'TimeLimit' THEN 'TIME_LIMIT' WHEN 'Restarting' THEN 'RESTARTING'
        WHEN 'Requeued' THEN 'REQUEUED' WHEN 'StartFailed' THEN 'START_FAILED'
        WHEN 'Killed' THEN 'KILLED' WHEN 'Deleting' THEN 'DELETING'
        WHEN 'Succeeded' THEN 'SUCCEEDED' WHEN 'Failed' THEN 'FAILED'
        WHEN 'Cancelled' THEN 'CANCELLED' WHEN 'Slurm' THEN 'SLURM'
        WHEN 'Created' THEN 'CREATED' WHEN 'Scaled' THEN 'SCALED' WHEN 'Fired' THEN 'FIRED'
        WHEN 'Skipped' THEN 'SKIPPED' WHEN 'Refused' THEN 'REFUSED'
        WHEN 'Paused' THEN 'PAUSED' WHEN 'Resumed' THEN 'RESUMED'
        ELSE 'LEGACY' END;
    UPDATE runs SET backfilled = 1 WHERE (
        SELECT e.code FROM events e WHERE e.run = runs.name AND e.grp IS NULL
        AND e.kind = 'Started' ORDER BY e.id DESC LIMIT 1) = 'BACKFILLED';
    """,
)

ACTIVE_STATES = ("Queued", "Starting", "Running", "Stopping")
FINISHED_STATES = ("Succeeded", "Failed", "Cancelled")
LIVE_WORKER_STATES = ("Starting", "Running", "Stopping")


class StoreError(Exception):
    """The state database cannot be used; the message says why, in one line."""


class DiskFull(StoreError):
    """A write found no space (SQLITE_FULL): it was rolled back, nothing of it is kept.

    The API answers ``507 DISK_FULL`` (runner/api/app.py); the loop retries on its next tick.
    """


class NameInUse(Exception):
    pass


def new_run_uid(now: float | None = None) -> str:
    """A run's immutable id: 32 hex digits, the submit time in ms first (ids sort by it)."""
    ms = int((time.time() if now is None else now) * 1000)
    return f"{ms:012x}{secrets.token_hex(10)}"


def is_run_uid(text: str) -> bool:
    """Whether ``text`` has the shape of a run's id (a safe file name, nothing else)."""
    return len(text) == 32 and all(c in "0123456789abcdef" for c in text)


@dataclass(frozen=True, slots=True)
class RunRow:
    name: str
    workspace: str
    owner: str
    uid: int
    gid: int
    spec_text: str  # the run spec as JSON; parsed only when needed (see spec())
    priority: int
    state: str
    reason: Reason | None
    submitted_at: float
    started_at: float | None
    finished_at: float | None
    exit_code: int | None
    restarts: int
    preemptions: int
    attempts: int
    preempted_by: RunRef | None
    stop_request: str | None
    quota_noted: bool
    grp: str | None = None  # the sweep, replica group or schedule that made it
    streak: int = 0  # replicas: quick exits in a row (the restart back-off grows with it)
    deps_met: bool = False  # every run of spec.after has succeeded (checked no more)
    run_uid: str = ""  # immutable, unique, from the submit: names the run's files on disk
    # a group's run: spec_text is only its part, the rest is this template's (templates.py)
    template: int | None = None
    template_doc: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    backfilled: bool = False  # its latest attempt was started by backfill, behind the head

    def spec(self) -> dict[str, Any]:
        """The run's whole spec document."""
        value: dict[str, Any] = json.loads(self.spec_text)
        return value if self.template_doc is None else run_document(self.template_doc, value)


@dataclass(frozen=True, slots=True)
class WorkerRow:
    id: int
    run: str
    attempt: int
    worker: int
    state: str
    handle: str | None
    gpus: tuple[int, ...]
    cpu_milli: int
    memory: int
    started_at: float
    stop_reason: str | None
    stop_deadline: float | None
    stopping_for: RunRef | None
    killed: bool
    exit_code: int | None
    error: str | None
    finished_at: float | None
    run_uid: str = ""  # the run's id (see RunRow.run_uid): names the worker's handle
    started_mono: float | None = None  # CLOCK_MONOTONIC at the start, on boot ``boot_id``
    stop_deadline_mono: float | None = None  # and at the SIGKILL time, while it stops
    boot_id: str | None = None
    executor: str | None = None  # who started it; None: a row from before migration 7


def latest_workers(workers: list[WorkerRow]) -> dict[int, WorkerRow]:
    """Each worker index's row of its latest attempt."""
    latest: dict[int, WorkerRow] = {}
    for w in workers:
        if w.worker not in latest or w.attempt > latest[w.worker].attempt:
            latest[w.worker] = w
    return latest


@dataclass(frozen=True, slots=True)
class EventRow:
    id: int
    run: str
    workspace: str
    time: float
    kind: str
    message: Reason
    grp: str | None = None  # set on a group's own events (``run`` is then the group's name)
    code: ReasonCode = ReasonCode.MESSAGE  # what the event says, for code to decide on


def _ref_json(ref: RunRef | None) -> str | None:
    return None if ref is None else json.dumps([ref.name, ref.workspace])


def _ref(text: str | None) -> RunRef | None:
    if text is None:
        return None
    name, workspace = json.loads(text)
    return RunRef(str(name), str(workspace))


def _reason(text: str | None) -> Reason | None:
    return None if text is None else Reason.from_json(json.loads(text))


def reason_json(reason: Reason | None) -> str | None:
    return None if reason is None else json.dumps(reason.to_json())


def _run(row: sqlite3.Row, template: dict[str, Any] | None) -> RunRow:
    return RunRow(
        row["name"], row["workspace"], row["owner"], row["uid"], row["gid"],
        row["spec"], row["priority"], row["state"], _reason(row["reason"]),
        row["submitted_at"], row["started_at"], row["finished_at"], row["exit_code"],
        row["restarts"], row["preemptions"], row["attempts"], _ref(row["preempted_by"]),
        row["stop_request"], bool(row["quota_noted"]), row["grp"], row["streak"],
        bool(row["deps_met"]), row["run_uid"] or "", row["template"], template,
        bool(row["backfilled"]),
    )  # fmt: skip


_WORKERS = "SELECT w.*, r.run_uid AS run_uid FROM workers w LEFT JOIN runs r ON r.name = w.run"


def _worker(row: sqlite3.Row) -> WorkerRow:
    return WorkerRow(
        row["id"], row["run"], row["attempt"], row["worker"], row["state"], row["handle"],
        tuple(json.loads(row["gpus"])), row["cpu_milli"], row["memory"], row["started_at"],
        row["stop_reason"], row["stop_deadline"], _ref(row["stopping_for"]), bool(row["killed"]),
        row["exit_code"], row["error"], row["finished_at"], row["run_uid"] or "",
        row["started_mono"], row["stop_deadline_mono"], row["boot_id"], row["executor"],
    )  # fmt: skip


class Store(GroupTables, ForgetTables):
    """One SQLite file; one connection per thread, opened on first use."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        # One writer at a time in this process: threads queue here at once,
        # instead of in SQLite's busy handler, which sleeps between retries.
        self._writer = threading.Lock()
        self._templates = {}
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
                for statement in MIGRATIONS[number].split(";"):
                    if statement.strip():
                        tx.execute(statement)
                tx.execute(f"PRAGMA user_version = {number + 1}")
                tx.execute(f"PRAGMA application_id = {SCHEMA_APPLICATION_ID}")

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE … COMMIT; rolled back on any exception (a failed COMMIT too).

        SQLite may have rolled back by itself (disk full): then there is nothing to roll
        back, and the error that caused it is the one raised. A full disk is DiskFull.
        """
        conn = self._connect()
        with self._writer:
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.OperationalError as e:
                if getattr(e, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
                    raise DiskFull(
                        f"no space left for the state database {self.path}: nothing was "
                        "written; free some space and try again"
                    ) from e
                raise

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # --------------------------------------------------------------- runs

    def _run_row(self, row: sqlite3.Row) -> RunRow:
        template = row["template"]
        return _run(row, None if template is None else self.template_doc(template))

    def insert_run(self, run: RunRow) -> None:
        """Acknowledge a submit: committed when this returns. NameInUse on a clash."""
        with self.transaction() as tx:
            self.insert_run_in(tx, run, f"Submitted by {run.owner}")

    def insert_run_in(self, tx: sqlite3.Connection, run: RunRow, message: str | Reason) -> None:
        """Insert within ``tx``; NameInUse (the whole transaction rolls back) on a clash."""
        try:
            tx.execute(
                "INSERT INTO runs (name, workspace, owner, uid, gid, spec, priority, state,"
                " reason, submitted_at, grp, run_uid, template)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    run.name, run.workspace, run.owner, run.uid, run.gid,
                    run.spec_text, run.priority, run.state,
                    reason_json(run.reason), run.submitted_at, run.grp,
                    run.run_uid or new_run_uid(run.submitted_at),
                    run.template,
                ),
            )  # fmt: skip
        except sqlite3.IntegrityError as e:
            raise NameInUse(run.name) from e
        why = message if isinstance(message, Reason) else Reason(message)
        self.add_event(tx, run.name, run.workspace, "Submitted", why, run.submitted_at)

    def get_run(self, name: str) -> RunRow | None:
        row = self._connect().execute("SELECT * FROM runs WHERE name = ?", (name,)).fetchone()
        return None if row is None else self._run_row(row)

    def runs(self, *, active_only: bool = False) -> list[RunRow]:
        sql = "SELECT * FROM runs"
        if active_only:
            sql += f" WHERE state IN {ACTIVE_STATES}"
        return [
            self._run_row(r) for r in self._connect().execute(sql + " ORDER BY submitted_at, name")
        ]

    def runs_to_settle(self) -> list[RunRow]:
        """Runs with workers, or a stop asked for: the only ones whose state may move."""
        sql = (
            "SELECT * FROM runs WHERE state IN ('Starting', 'Running', 'Stopping')"
            " OR (state = 'Queued' AND stop_request IS NOT NULL)"
        )
        return [self._run_row(r) for r in self._connect().execute(sql)]

    def update_run(self, tx: sqlite3.Connection, name: str, **fields: Any) -> None:
        for key in ("reason",):
            if key in fields:
                fields[key] = reason_json(fields[key])
        if "preempted_by" in fields:
            fields["preempted_by"] = _ref_json(fields["preempted_by"])
        cols = ", ".join(f"{k} = ?" for k in fields)
        tx.execute(f"UPDATE runs SET {cols} WHERE name = ?", (*fields.values(), name))

    def delete_run_row(self, tx: sqlite3.Connection, name: str) -> None:
        """Forget a run: its row, workers and events; its files are noted for the loop to
        remove (see runner/store/forget.py). Its usage stays."""
        self.note_forgotten(tx, name)
        row = tx.execute("SELECT template FROM runs WHERE name = ?", (name,)).fetchone()
        tx.execute("DELETE FROM events WHERE run = ? AND grp IS NULL", (name,))
        tx.execute("DELETE FROM runs WHERE name = ?", (name,))
        if row is not None and row[0] is not None:
            self.drop_template_if_unused(tx, row[0])

    def unfinished_runs_of(self, tx: sqlite3.Connection, uid: int) -> int:
        """How many runs of ``uid`` are not finished (Queued, Starting, Running, Stopping)."""
        sql = f"SELECT COUNT(*) FROM runs WHERE uid = ? AND state IN {ACTIVE_STATES}"
        count: int = tx.execute(sql, (uid,)).fetchone()[0]
        return count

    def runs_of_group(self, grp: str) -> list[RunRow]:
        sql = "SELECT * FROM runs WHERE grp = ? ORDER BY submitted_at, name"
        return [self._run_row(r) for r in self._connect().execute(sql, (grp,))]

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
        self, tx: sqlite3.Connection, run: str, attempt: int, worker: int,
        gpus: tuple[int, ...], cpu_milli: int, memory: int, now: float,
        mono: float | None = None, boot: str | None = None, executor: str | None = None,
    ) -> None:  # fmt: skip
        tx.execute(
            "INSERT INTO workers (run, attempt, worker, state, gpus, cpu_milli, memory,"
            " started_at, started_mono, boot_id, executor)"
            " VALUES (?,?,?,'Starting',?,?,?,?,?,?,?)",
            (run, attempt, worker, json.dumps(list(gpus)), cpu_milli, memory, now, mono, boot,
             executor),
        )  # fmt: skip

    def live_workers(self) -> list[WorkerRow]:
        sql = f"{_WORKERS} WHERE w.state IN {LIVE_WORKER_STATES} ORDER BY w.run, w.worker"
        return [_worker(r) for r in self._connect().execute(sql)]

    def workers_of(self, run: str) -> list[WorkerRow]:
        sql = f"{_WORKERS} WHERE w.run = ? ORDER BY w.attempt, w.worker"
        return [_worker(r) for r in self._connect().execute(sql, (run,))]

    def update_worker(self, tx: sqlite3.Connection, worker_id: int, **fields: Any) -> None:
        if "stopping_for" in fields:
            fields["stopping_for"] = _ref_json(fields["stopping_for"])
        cols = ", ".join(f"{k} = ?" for k in fields)
        tx.execute(f"UPDATE workers SET {cols} WHERE id = ?", (*fields.values(), worker_id))

    # ---------------------------------------------------- events and usage

    def add_event(
        self, tx: sqlite3.Connection, run: str, workspace: str, kind: str, message: Reason,
        now: float | None = None, grp: str | None = None, code: ReasonCode | None = None,
    ) -> None:  # fmt: skip
        """An event of a run; of a group when ``grp`` is given (``run`` then names the group).

        ``code``: what it says, by default the one of its kind (``event_code``)."""
        code = event_code(kind, message) if code is None else code
        tx.execute(
            "INSERT INTO events (run, workspace, time, kind, message, grp, code)"
            " VALUES (?,?,?,?,?,?,?)",
            (run, workspace, time.time() if now is None else now, kind, reason_json(message), grp,
             code.value),
        )  # fmt: skip

    def events(
        self, run: str | None = None, *, after: int = 0, grp: str | None = None
    ) -> list[EventRow]:
        sql, args = "SELECT * FROM events WHERE id > ?", [after]
        if run is not None:
            sql += " AND run = ? AND grp IS NULL"
            args.append(run)  # type: ignore[arg-type]  # mixed int/str parameters
        if grp is not None:
            sql += " AND grp = ? AND run = grp"
            args.append(grp)  # type: ignore[arg-type]
        rows = self._connect().execute(sql + " ORDER BY id", args)
        return [
            EventRow(r["id"], r["run"], r["workspace"], r["time"], r["kind"],
                     Reason.from_json(json.loads(r["message"])), r["grp"], ReasonCode(r["code"]))
            for r in rows
        ]  # fmt: skip

    def add_usage(self, tx: sqlite3.Connection, run: RunRow, gpu_s: float, cpu_s: float) -> None:
        """Add to the run's usage, kept by its id: it outlives the run being forgotten."""
        tx.execute(
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
