"""The runs table: the queue's reads (the active runs kept between commits) and the typed
writes of a run's row, each named for what it records.

Each write takes the open transaction (runner/store/tx.py) its caller writes in: a decision
and its event commit together, before they are acted on. An argument given as ``KEEP`` (the
default) leaves its column as it is.
"""

from __future__ import annotations

import json
import sqlite3
import time
from bisect import insort
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from runner.clock import Now
from runner.model import RunState, StopReason, sql_list
from runner.reasons import Reason, ReasonCode, RunRef
from runner.rows import RunRow, new_run_uid
from runner.store.core import Core
from runner.store.events import Events
from runner.store.rows import RUN_COLUMNS, RUN_TEMPLATE, _ref_json, reason_json, run_from_tuple
from runner.store.templates import Templates
from runner.store.tx import KEEP, Keep, Tx
from runner.store.usage import Usage, record_finish

REREAD_MAX = 500  # runs written since the last read, at most, read again one by one
_ACTIVE = sql_list(RunState.ACTIVE)


class NameInUse(Exception):
    pass


class StartState(NamedTuple):
    state: RunState
    stop_request: StopReason | None
    attempts: int


def _queue_order(run: RunRow) -> tuple[float, str]:
    return run.submitted_at, run.name  # as ORDER BY submitted_at, name (names are unique)


def _reason(reason: Reason | Keep | None) -> str | Keep | None:
    return reason if reason is KEEP else reason_json(reason)


def _run(tx: Tx, name: str, **fields: object) -> None:
    tx._update("runs", "name = ?", (name,), fields)


def _state(tx: Tx, name: str) -> RunState | None:
    row = tx._sql("SELECT state FROM runs WHERE name = ?", (name,)).fetchone()
    return None if row is None else RunState(row[0])


def _note_forgotten(tx: Tx, name: str) -> None:
    """Within the transaction that removes run ``name``: note what it leaves on disk."""
    row = tx._sql("SELECT run_uid FROM runs WHERE name = ?", (name,)).fetchone()
    if row is None or not row[0]:
        return
    sql = "SELECT DISTINCT handle FROM workers WHERE run = ? AND handle IS NOT NULL"
    handles = sorted(str(h) for (h,) in tx._sql(sql, (name,)))
    tx._sql(
        "INSERT OR IGNORE INTO forgotten (run_uid, handles, time) VALUES (?,?,?)",
        (row[0], json.dumps(handles), time.time()),
    )


class Runs:
    """Reads and writes of ``runs``: a submit writes its event (``events``), a run
    forgotten notes its files (runner/store/forget.py) and its usage record's expiry
    (``usage``), and drops its template when no other row uses it (``templates``)."""

    def __init__(self, core: Core, events: Events, templates: Templates, usage: Usage) -> None:
        self._core = core
        self._events = events
        self._templates = templates
        self._usage = usage

    def _read_runs(self, where: str = "", args: tuple[Any, ...] = ()) -> list[RunRow]:
        """``SELECT`` of runs by position (plain tuples: the queue's reads are thousands)."""
        cursor = self._core.connect().cursor()
        cursor.row_factory = None
        template = self._templates.doc
        return [
            run_from_tuple(r, None if r[RUN_TEMPLATE] is None else template(r[RUN_TEMPLATE]))
            for r in cursor.execute(f"SELECT {RUN_COLUMNS} FROM runs {where}", args)
        ]

    def insert(self, run: RunRow) -> None:
        """Acknowledge a submit: committed when this returns. NameInUse on a clash."""
        with self._core.transaction() as tx:
            self.insert_in(tx, run, f"Submitted by {run.owner}")

    def insert_in(self, tx: Tx, run: RunRow, message: str | Reason) -> None:
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
        self._events.add(tx, run.name, run.workspace, ReasonCode.SUBMITTED, why, run.submitted_at)

    def get(self, name: str) -> RunRow | None:
        found = self._read_runs("WHERE name = ?", (name,))
        return found[0] if found else None

    def all(self, *, active_only: bool = False) -> list[RunRow]:
        """Every run (``active_only``: not finished), by submit time then name.

        The active runs last read are kept: after a commit only the rows it wrote are read
        again (the whole queue when a statement may have written any). The loop, the list
        and the estimates read the same queue, thousands of rows."""
        if not active_only:
            return self._read_runs("ORDER BY submitted_at, name")
        core, where = self._core, f"WHERE state IN {_ACTIVE}"
        if core.connect().in_transaction:  # its own writes, not committed: never kept
            return self._read_runs(where + " ORDER BY submitted_at, name")
        with core.writer:  # no commit between the generation and the rows read
            generation, cached = core.generation, core.active
            if cached is not None and cached[0] == generation:
                return list(cached[1])
            written = None if cached is None else core.written_since(cached[0])
            if cached is not None and written is not None and len(written) <= REREAD_MAX:
                rows = self._merged(cached[1], written, where)
                core.active = (generation, rows)
                return list(rows)
        generation = core.generation  # read whole, outside the lock: one SELECT
        rows = self._read_runs(where + " ORDER BY submitted_at, name")
        core.active = (generation, rows)  # read after ``generation``: at least as new
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

    def to_settle(self) -> list[RunRow]:
        """Runs with workers, or a stop asked for: the only ones whose state may move."""
        sql = (
            f"SELECT * FROM runs WHERE state IN {sql_list(RunState.LIVE)}"
            " OR (state = 'Queued' AND stop_request IS NOT NULL)"
        )
        return self._read_runs(sql.removeprefix("SELECT * FROM runs "))

    def delete(self, tx: Tx, name: str) -> None:
        """Forget a run: its row, workers and events; its files are noted for the loop to
        remove (see runner/store/forget.py). Its usage stays."""
        _note_forgotten(tx, name)
        row = tx._sql("SELECT template, run_uid FROM runs WHERE name = ?", (name,)).fetchone()
        if row is not None and row[1]:
            self._usage.forgotten(tx, row[1])
        tx._sql("DELETE FROM events WHERE run = ? AND grp IS NULL", (name,))
        tx._sql("DELETE FROM runs WHERE name = ?", (name,), run=name)
        if row is not None and row[0] is not None:
            self._templates.drop_if_unused(tx, row[0])

    def unfinished_of(self, tx: Tx, uid: int) -> int:
        """How many runs of ``uid`` are not finished (Queued, Starting, Running, Stopping)."""
        # by the state's index (the queue), not the owner's (every run they ever had)
        sql = f"SELECT COUNT(*) FROM runs WHERE +uid = ? AND state IN {sql_list(RunState.ACTIVE)}"
        count: int = tx._sql(sql, (uid,)).fetchone()[0]
        return count

    def of_group(self, grp: str) -> list[RunRow]:
        return self._read_runs("WHERE grp = ? ORDER BY submitted_at, name", (grp,))

    def states(self, names: Iterable[str]) -> dict[str, tuple[str, str]]:
        """Each named run's (state, workspace); runs that do not exist are left out."""
        wanted = sorted(set(names))
        out: dict[str, tuple[str, str]] = {}
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT name, state, workspace FROM runs WHERE name IN ({marks})"
            out.update({r[0]: (r[1], r[2]) for r in self._core.connect().execute(sql, chunk)})
        return out

    def names_in_use(self, tx: Tx, names: Iterable[str]) -> set[str]:
        """Within ``tx``: which of ``names`` a stored run has."""
        wanted, taken = sorted(set(names)), set[str]()
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            sql = f"SELECT name FROM runs WHERE name IN ({','.join('?' * len(chunk))})"
            taken.update(r[0] for r in tx._sql(sql, chunk))
        return taken

    def insert_many(self, tx: Tx, runs: Sequence[RunRow], message: Reason) -> None:
        """A batch of new runs and each one's Submitted event (``message``), within ``tx``.

        The names are free (``names_in_use`` read in the same transaction): a clash is
        sqlite3.IntegrityError, and the whole transaction rolls back."""
        tx._many(
            "INSERT INTO runs (name, workspace, owner, uid, gid, spec, priority, state,"
            " reason, submitted_at, grp, run_uid, template) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                (
                    r.name,
                    r.workspace,
                    r.owner,
                    r.uid,
                    r.gid,
                    r.spec_text,
                    r.priority,
                    r.state,
                    reason_json(r.reason),
                    r.submitted_at,
                    r.grp,
                    r.run_uid or new_run_uid(r.submitted_at),
                    r.template,
                )
                for r in runs
            ),
            runs=True,  # many at once: the queue is read again whole
        )
        why, code = reason_json(message), ReasonCode.SUBMITTED.value
        tx._many(
            "INSERT INTO events (run, workspace, time, kind, message, grp, code)"
            " VALUES (?,?,?,'Submitted',?,NULL,?)",
            ((r.name, r.workspace, r.submitted_at, why, code) for r in runs),
        )

    def claim_start(
        self, tx: Tx, name: str, attempt: int, state: RunState, now: float, *, backfilled: bool
    ) -> None:
        """A start decided: its attempt counted, its reason and preemptor cleared, whether
        it was started by backfill noted."""
        _run(tx, name, attempts=attempt, state=state, started_at=now, reason=None,
             preempted_by=None, backfilled=int(backfilled))  # fmt: skip

    def claimable(self, tx: Tx, name: str) -> StartState | None:
        """Within ``tx``: what a start decision reads again first; None if the run is gone."""
        sql = "SELECT state, stop_request, attempts FROM runs WHERE name = ?"
        row = tx._sql(sql, (name,)).fetchone()
        return (
            None
            if row is None
            else StartState(
                RunState(row[0]), None if row[1] is None else StopReason(row[1]), row[2]
            )
        )

    def state_in(self, tx: Tx, name: str) -> RunState:
        """Within ``tx``: the state of run ``name`` (which exists)."""
        return RunState(tx._sql("SELECT state FROM runs WHERE name=?", (name,)).fetchone()[0])

    def started(self, tx: Tx, name: str) -> None:
        """A worker runs: a Starting run is Running (a run in any other state stays)."""
        sql = "UPDATE runs SET state='Running' WHERE name=? AND state='Starting'"
        tx._sql(sql, (name,), run=name)

    def set_state(
        self, tx: Tx, name: str, state: RunState, reason: Reason | Keep | None = KEEP,
        started_at: float | Keep = KEEP,
    ) -> None:  # fmt: skip
        _run(tx, name, state=state, reason=_reason(reason), started_at=started_at)

    def set_reason(self, tx: Tx, name: str, reason: Reason | None) -> None:
        _run(tx, name, reason=reason_json(reason))

    def set_priority(self, tx: Tx, name: str, priority: int) -> None:
        _run(tx, name, priority=priority)

    def set_held(self, tx: Tx, name: str, held_by: str | None, reason: Reason | None) -> None:
        """Held by ``held_by`` (astra hold), or released (None); its reason with it."""
        _run(tx, name, held_by=held_by, reason=reason_json(reason))

    def set_attempts(self, tx: Tx, name: str, attempt: int) -> None:
        _run(tx, name, attempts=attempt)

    def note_quota(self, tx: Tx, name: str) -> None:
        """Its QuotaReached event is written: not again while it waits."""
        _run(tx, name, quota_noted=1)

    def mark_deps_met(self, tx: Tx, name: str) -> None:
        _run(tx, name, deps_met=1)

    def request_stop(
        self, tx: Tx, name: str, request: StopReason | None, reason: Reason | Keep = KEEP, *,
        stopping: bool = False, exit_code: int | Keep | None = KEEP,
        restarts: int | Keep = KEEP,
    ) -> None:  # fmt: skip
        """Note why the run stops (``delete``, ``failed``, ``restart``, ``timelimit``);
        ``stopping``: its state is Stopping at once."""
        _run(tx, name, stop_request=request, reason=_reason(reason), exit_code=exit_code,
             restarts=restarts, state=RunState.STOPPING if stopping else KEEP)  # fmt: skip

    def finish(
        self, tx: Tx, name: str, state: RunState, finished_at: float,
        reason: Reason | Keep | None = KEEP, exit_code: int | Keep | None = KEEP,
    ) -> None:  # fmt: skip
        """The run is over: Succeeded, Failed or Cancelled; its usage record is written
        with it (runner/store/usage.py)."""
        was = _state(tx, name)
        _run(tx, name, state=state, finished_at=finished_at, reason=_reason(reason),
             exit_code=exit_code)  # fmt: skip
        record_finish(tx, name, was)

    def cancel_queued(self, tx: Tx, name: str, now: float) -> None:
        """A queued run deleted: Cancelled at once (its usage record written with it)."""
        was = _state(tx, name)
        _run(tx, name, state=RunState.CANCELLED, finished_at=now,
             reason=reason_json(Reason("Deleted", code=ReasonCode.MESSAGE)),
             stop_request=StopReason.DELETE)  # fmt: skip
        record_finish(tx, name, was)

    def requeue(
        self, tx: Tx, name: str, *, clear_request: bool = False, restarts: int | Keep = KEEP,
        reason: Reason | Keep = KEEP,
    ) -> None:  # fmt: skip
        """Queued again; ``clear_request``: its stop request is done with."""
        _run(tx, name, state=RunState.QUEUED, stop_request=None if clear_request else KEEP,
             restarts=restarts, reason=_reason(reason))  # fmt: skip

    def back_off(self, tx: Tx, name: str, fails: int, quick: int, until: Now | None) -> None:
        """A failure counted (runner/engine/backoff.py): ``fails`` and ``quick`` in a row,
        and the moment it may start again on both clocks (None: at once)."""
        _run(tx, name, fails=fails, quick=quick,
             restart_at=None if until is None else until.wall,
             restart_mono=None if until is None else until.mono,
             restart_boot=None if until is None else until.boot)  # fmt: skip

    def note_restarts(
        self, tx: Tx, name: str, restarts: int, preemptions: int | Keep = KEEP
    ) -> None:
        _run(tx, name, restarts=restarts, preemptions=preemptions)

    def note_preempted(
        self, tx: Tx, name: str, head: RunRef, preemptions: int, reason: Reason
    ) -> None:
        """Preempted for ``head``: counted, and waiting for it to start."""
        _run(tx, name, preempted_by=_ref_json(head), preemptions=preemptions,
             reason=reason_json(reason))  # fmt: skip

    def restart_replica(
        self, tx: Tx, name: str, reason: Reason, streak: int, priority: int
    ) -> None:
        """A finished replica queued again as new (but its counted streak of quick exits)."""
        _run(
            tx, name, state=RunState.QUEUED, reason=reason_json(reason), started_at=None,
            finished_at=None, exit_code=None, restarts=0, stop_request=None, preempted_by=None,
            quota_noted=0, streak=streak, priority=priority, held_by=None, fails=0, quick=0,
            restart_at=None, restart_mono=None, restart_boot=None,
        )  # fmt: skip

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
            self._templates.drop_if_unused(tx, row[0])
