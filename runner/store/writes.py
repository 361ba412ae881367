"""The store's typed writes of runs and workers, each named for what it records.

Mixed into :class:`runner.store.db.Store`. Each takes the open transaction (runner/store/tx.py)
its caller writes in: a decision and its event commit together, before they are acted on.
An argument given as ``KEEP`` (the default) leaves its column as it is.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from runner.clock import Now
from runner.model import RunState, StopReason, WorkerState, sql_list
from runner.reasons import Reason, ReasonCode, RunRef
from runner.rows import RunRow, new_run_uid
from runner.store.rows import _ref_json, reason_json
from runner.store.tx import KEEP, Keep, Tx
from runner.store.usage import record_finish

_LIVE = sql_list(WorkerState.LIVE)


class StartState(NamedTuple):
    state: RunState
    stop_request: StopReason | None
    attempts: int


def _reason(reason: Reason | Keep | None) -> str | Keep | None:
    return reason if reason is KEEP else reason_json(reason)


def _run(tx: Tx, name: str, **fields: object) -> None:
    tx._update("runs", "name = ?", (name,), fields)


def _state(tx: Tx, name: str) -> RunState | None:
    row = tx._sql("SELECT state FROM runs WHERE name = ?", (name,)).fetchone()
    return None if row is None else RunState(row[0])


def _worker(tx: Tx, worker_id: int, **fields: object) -> None:
    tx._update("workers", "id = ?", (worker_id,), fields)


class RunWrites:
    """Writes of one run's row (and of many new ones: ``insert_runs_in``)."""

    def names_in_use(self, tx: Tx, names: Iterable[str]) -> set[str]:
        """Within ``tx``: which of ``names`` a stored run has."""
        wanted, taken = sorted(set(names)), set[str]()
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            sql = f"SELECT name FROM runs WHERE name IN ({','.join('?' * len(chunk))})"
            taken.update(r[0] for r in tx._sql(sql, chunk))
        return taken

    def insert_runs_in(self, tx: Tx, runs: Sequence[RunRow], message: Reason) -> None:
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

    def run_state_in(self, tx: Tx, name: str) -> RunState:
        """Within ``tx``: the state of run ``name`` (which exists)."""
        return RunState(tx._sql("SELECT state FROM runs WHERE name=?", (name,)).fetchone()[0])

    def has_live_worker(self, tx: Tx, name: str) -> bool:
        sql = f"SELECT 1 FROM workers WHERE run = ? AND state IN {_LIVE}"
        return tx._sql(sql, (name,)).fetchone() is not None

    def run_started(self, tx: Tx, name: str) -> None:
        """A worker runs: a Starting run is Running (a run in any other state stays)."""
        sql = "UPDATE runs SET state='Running' WHERE name=? AND state='Starting'"
        tx._sql(sql, (name,), run=name)

    def set_run_state(
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

    def finish_run(
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


class WorkerWrites:
    """Writes of worker rows (one per worker and attempt)."""

    def worker_started(self, tx: Tx, run: str, attempt: int, worker: int, handle: str) -> None:
        """The executor started it: Running, with its handle (if still Starting)."""
        tx._sql(
            "UPDATE workers SET state='Running', handle=? WHERE run=? AND attempt=?"
            " AND worker=? AND state='Starting'",
            (handle, run, attempt, worker),
        )

    def worker_start_failed(
        self, tx: Tx, run: str, attempt: int, worker: int, error: str, now: float
    ) -> None:
        tx._sql(
            "UPDATE workers SET state='Exited', error=?, finished_at=? WHERE run=? AND attempt=?"
            " AND worker=? AND state='Starting'",
            (error, now, run, attempt, worker),
        )

    def set_worker_running(
        self, tx: Tx, worker_id: int, *, handle: str | Keep = KEEP,
        gpus: tuple[int, ...] | Keep = KEEP, stop_reason: StopReason | Keep = KEEP,
    ) -> None:  # fmt: skip
        """Running: adopted, seen running, or its stop withdrawn (``stop_reason``)."""
        shown = gpus if gpus is KEEP else json.dumps(list(gpus))
        _worker(tx, worker_id, state=WorkerState.RUNNING, handle=handle, gpus=shown,
                stop_reason=stop_reason)  # fmt: skip

    def worker_waits(self, tx: Tx, worker_id: int) -> None:
        """Back to Starting, without GPUs or a stop (a Slurm job queued again)."""
        _worker(
            tx,
            worker_id,
            state=WorkerState.STARTING,
            gpus="[]",
            stop_reason=None,
            stop_deadline=None,
        )

    def stop_worker(
        self, tx: Tx, worker_id: int, reason: StopReason, deadline: float, *,
        for_run: RunRef | Keep | None = KEEP, deadline_mono: float | Keep = KEEP,
        started_mono: float | Keep = KEEP, boot: str | Keep | None = KEEP,
    ) -> None:  # fmt: skip
        """Stopping, for ``reason``, until ``deadline`` (then the SIGKILL)."""
        _worker(
            tx, worker_id, state=WorkerState.STOPPING, stop_reason=reason, stop_deadline=deadline,
            stopping_for=for_run if for_run is KEEP else _ref_json(for_run),
            stop_deadline_mono=deadline_mono, started_mono=started_mono, boot_id=boot,
        )  # fmt: skip

    def mark_killed(self, tx: Tx, worker_id: int) -> None:
        _worker(tx, worker_id, killed=1)

    def end_worker(
        self, tx: Tx, worker_id: int, state: WorkerState, finished_at: float, *,
        exit_code: int | Keep | None = KEEP, error: str | Keep | None = KEEP,
        stop_reason: StopReason | Keep | None = KEEP,
    ) -> None:  # fmt: skip
        """It ended (Exited, Lost) or never began (Cancelled)."""
        _worker(tx, worker_id, state=state, finished_at=finished_at, exit_code=exit_code,
                error=error, stop_reason=stop_reason)  # fmt: skip

    def settle_worker(self, tx: Tx, worker_id: int, state: WorkerState) -> None:
        """An ended worker classified: Done, Failed or Cancelled."""
        _worker(tx, worker_id, state=state)

    def set_job_handle(self, tx: Tx, run: str, attempt: int, handle: str) -> None:
        """The Slurm job submitted for the run's attempt (its only worker, 0)."""
        sql = "UPDATE workers SET handle = ? WHERE run = ? AND attempt = ? AND worker = 0"
        tx._sql(sql, (handle, run, attempt))

    def fail_job_worker(self, tx: Tx, run: str, attempt: int, error: str, now: float) -> None:
        """The worker written for an sbatch that Slurm refused."""
        tx._sql(
            "UPDATE workers SET state = 'Failed', error = ?, finished_at = ?"
            " WHERE run = ? AND attempt = ? AND worker = 0",
            (error, now, run, attempt),
        )
