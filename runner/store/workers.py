"""The workers table: one row per worker and attempt, its state written before it is
acted on (``Starting`` before its container is created, ``Stopping`` before SIGTERM).

Each write takes the open transaction (runner/store/tx.py) its caller writes in. An
argument given as ``KEEP`` (the default) leaves its column as it is.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from runner.model import StopReason, WorkerState, sql_list
from runner.reasons import RunRef
from runner.rows import WorkerRow
from runner.store.core import Core
from runner.store.rows import _WORKERS, _ref_json, _worker
from runner.store.tx import KEEP, Keep, Tx

_LIVE = sql_list(WorkerState.LIVE)


def _write(tx: Tx, worker_id: int, **fields: object) -> None:
    tx._update("workers", "id = ?", (worker_id,), fields)


def attempt_seconds(end: str, table: str = "") -> str:
    """SQL: the seconds one attempt of a run ran, as its usage record counts them: the
    mean of its workers' (a gang's run together), each from its start to ``end``. An
    aggregate of one attempt's rows (``GROUP BY attempt``); ``table``: the workers' alias."""
    started = f"{table}.started_at" if table else "started_at"
    return f"TOTAL(MAX(0, {end} - {started})) / COUNT(*)"


class Workers:
    """Reads and writes of ``workers``."""

    def __init__(self, core: Core) -> None:
        self._core = core

    def insert(
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

    def live(self) -> list[WorkerRow]:
        sql = f"{_WORKERS} WHERE w.state IN {sql_list(WorkerState.LIVE)} ORDER BY w.run, w.worker"
        return [_worker(r) for r in self._core.connect().execute(sql)]

    def of(self, run: str) -> list[WorkerRow]:
        sql = f"{_WORKERS} WHERE w.run = ? ORDER BY w.attempt, w.worker"
        return [_worker(r) for r in self._core.connect().execute(sql, (run,))]

    def ran_before(self, runs: Iterable[str]) -> dict[str, float]:
        """Seconds each of ``runs`` ran in its attempts before the latest, in this life of
        it (since its last usage record), as its usage record will count them: what a run
        requeued and resumed has done already (a run absent: none)."""
        names = sorted(set(runs))
        out: dict[str, float] = {}
        for i in range(0, len(names), 500):
            chunk = names[i : i + 500]
            sql = (
                f"SELECT w.run, {attempt_seconds('w.finished_at', 'w')}"
                " FROM workers w JOIN runs r ON r.name = w.run"
                f" WHERE w.run IN ({','.join('?' * len(chunk))}) AND w.attempt < r.attempts"
                " AND w.finished_at IS NOT NULL AND w.started_at >= COALESCE((SELECT"
                " MAX(u.finished_at) FROM usage_records u WHERE u.run_uid = r.run_uid), 0)"
                " GROUP BY w.run, w.attempt"
            )
            for run, seconds in self._core.connect().execute(sql, chunk):
                out[run] = out.get(run, 0.0) + seconds
        return out

    def has_live(self, tx: Tx, name: str) -> bool:
        sql = f"SELECT 1 FROM workers WHERE run = ? AND state IN {_LIVE}"
        return tx._sql(sql, (name,)).fetchone() is not None

    def started(self, tx: Tx, run: str, attempt: int, worker: int, handle: str) -> None:
        """The executor started it: Running, with its handle (if still Starting)."""
        tx._sql(
            "UPDATE workers SET state='Running', handle=? WHERE run=? AND attempt=?"
            " AND worker=? AND state='Starting'",
            (handle, run, attempt, worker),
        )

    def start_failed(
        self, tx: Tx, run: str, attempt: int, worker: int, error: str, now: float
    ) -> None:
        tx._sql(
            "UPDATE workers SET state='Exited', error=?, finished_at=? WHERE run=? AND attempt=?"
            " AND worker=? AND state='Starting'",
            (error, now, run, attempt, worker),
        )

    def set_running(
        self, tx: Tx, worker_id: int, *, handle: str | Keep = KEEP,
        gpus: tuple[int, ...] | Keep = KEEP, stop_reason: StopReason | Keep = KEEP,
    ) -> None:  # fmt: skip
        """Running: adopted, seen running, or its stop withdrawn (``stop_reason``)."""
        shown = gpus if gpus is KEEP else json.dumps(list(gpus))
        _write(tx, worker_id, state=WorkerState.RUNNING, handle=handle, gpus=shown,
                stop_reason=stop_reason)  # fmt: skip

    def waits(self, tx: Tx, worker_id: int) -> None:
        """Back to Starting, without GPUs or a stop (a Slurm job queued again)."""
        _write(
            tx,
            worker_id,
            state=WorkerState.STARTING,
            gpus="[]",
            stop_reason=None,
            stop_deadline=None,
        )

    def stop(
        self, tx: Tx, worker_id: int, reason: StopReason, deadline: float, *,
        for_run: RunRef | Keep | None = KEEP, deadline_mono: float | Keep = KEEP,
        started_mono: float | Keep = KEEP, boot: str | Keep | None = KEEP,
    ) -> None:  # fmt: skip
        """Stopping, for ``reason``, until ``deadline`` (then the SIGKILL)."""
        _write(
            tx, worker_id, state=WorkerState.STOPPING, stop_reason=reason, stop_deadline=deadline,
            stopping_for=for_run if for_run is KEEP else _ref_json(for_run),
            stop_deadline_mono=deadline_mono, started_mono=started_mono, boot_id=boot,
        )  # fmt: skip

    def mark_killed(self, tx: Tx, worker_id: int) -> None:
        _write(tx, worker_id, killed=1)

    def end(
        self, tx: Tx, worker_id: int, state: WorkerState, finished_at: float, *,
        exit_code: int | Keep | None = KEEP, error: str | Keep | None = KEEP,
        stop_reason: StopReason | Keep | None = KEEP,
    ) -> None:  # fmt: skip
        """It ended (Exited, Lost) or never began (Cancelled)."""
        _write(tx, worker_id, state=state, finished_at=finished_at, exit_code=exit_code,
                error=error, stop_reason=stop_reason)  # fmt: skip

    def settle(self, tx: Tx, worker_id: int, state: WorkerState) -> None:
        """An ended worker classified: Done, Failed or Cancelled."""
        _write(tx, worker_id, state=state)

    def set_job_handle(self, tx: Tx, run: str, attempt: int, handle: str) -> None:
        """The Slurm job submitted for the run's attempt (its only worker, 0)."""
        sql = "UPDATE workers SET handle = ? WHERE run = ? AND attempt = ? AND worker = 0"
        tx._sql(sql, (handle, run, attempt))

    def fail_job(self, tx: Tx, run: str, attempt: int, error: str, now: float) -> None:
        """The worker written for an sbatch that Slurm refused."""
        tx._sql(
            "UPDATE workers SET state = 'Failed', error = ?, finished_at = ?"
            " WHERE run = ? AND attempt = ? AND worker = 0",
            (error, now, run, attempt),
        )
