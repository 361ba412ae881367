"""Usage records: one row per finished run, kept after the run is forgotten.

A run that finishes (Succeeded, Failed or Cancelled) leaves a record in ``usage_records``,
written in the transaction that finishes it (``Runs.finish``, ``Runs.cancel_queued``):
its workspace, owner, outcome and exit code, the GPU- and core-seconds it used (from the
``usage`` table the loop adds to as each worker ends), its wait (submit to first start),
preemptions and restarts, and what a replay of it needs (``astra sim --history``): its
priority, time limit and workers, what one worker asked, and how long its workers ran.
``astra usage`` and ``astra history`` read these, so they outlive
``[machine] finished_retention``. A replica that finishes again and again leaves one record
per finish, each with what that life used. Records are pruned after USAGE_KEPT seconds
(those of runs the store still holds are kept, so each life's share stays exact).
"""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import dataclass

from runner.model import RunState
from runner.rows import RunRow, UsageRecord
from runner.runspec.parse import parse_spec
from runner.runspec.templates import run_document
from runner.store.core import Core
from runner.store.rows import from_columns
from runner.store.tx import Tx
from runner.store.workers import attempt_seconds

USAGE_KEPT = 400 * 86_400.0  # seconds a usage record is kept (about 13 months)
MAX_HISTORY = 10_000  # records one history read returns at most
_EXPIRED = (
    "usage_records u WHERE u.finished_at < ?"
    " AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_uid = u.run_uid)"
)


@dataclass(frozen=True, slots=True)
class UsageSum:
    """The records of one workspace, owner and outcome, added up."""

    workspace: str
    owner: str
    outcome: RunState
    runs: int
    gpu_seconds: float
    cpu_seconds: float
    preemptions: int
    restarts: int


@dataclass(frozen=True, slots=True)
class Asked:
    """What a run's spec asked, as a usage record keeps it: its time limit and workers, a
    shared run's memory on each GPU, and one worker's cores and memory."""

    time_limit_seconds: int | None = None
    workers: int = 1
    gpu_memory: int | None = None
    cpus: float = 0.0
    memory: int | None = None


def _record(r: sqlite3.Row) -> UsageRecord:
    return from_columns(UsageRecord, r, outcome=RunState(r["outcome"]))


def _asked(tx: Tx, name: str) -> Asked:
    """What run ``name``'s stored spec asked (a group's run: with its template's part);
    the defaults when it cannot be read as a run spec."""
    row = tx._sql(
        "SELECT r.spec, t.spec FROM runs r LEFT JOIN templates t ON t.id = r.template"
        " WHERE r.name = ?",
        (name,),
    ).fetchone()
    if row is None:
        return Asked()
    try:
        doc = json.loads(row[0])
        if row[1] is not None:
            doc = run_document(json.loads(row[1]), doc)
        spec = parse_spec(doc, stored=True)
    except (ValueError, TypeError, KeyError, AttributeError):
        return Asked()
    one, task = spec.worker_resources(), spec.task
    return Asked(
        time_limit_seconds=task.time_limit_seconds,
        workers=spec.workers,
        gpu_memory=task.gpu_share if task.shared and task.gpu_share else None,
        cpus=one.cpu_milli / 1000,
        memory=one.memory or None,
    )


def record_finish(tx: Tx, name: str, was: RunState | None) -> None:
    """Within the transaction that finished run ``name``: its usage record.

    ``was``: its state before; a run that was already finished leaves no second record.
    """
    if was is None or was.finished:
        return
    run = tx._sql(
        "SELECT run_uid, workspace, owner, state, exit_code, submitted_at, finished_at,"
        " preemptions, restarts, attempts, priority FROM runs WHERE name = ?",
        (name,),
    ).fetchone()
    if run is None or not RunState(run["state"]).finished:
        return
    uid = run["run_uid"] or ""
    before = tx._sql(
        "SELECT COUNT(*), MAX(finished_at), TOTAL(gpu_seconds), TOTAL(cpu_seconds),"
        " TOTAL(preemptions) FROM usage_records WHERE run_uid = ?",
        (uid,),
    ).fetchone()
    begin = before[1] if before[0] else run["submitted_at"]
    used = tx._sql(
        "SELECT gpu_seconds, cpu_seconds FROM usage WHERE run_uid = ?", (uid,)
    ).fetchone()
    gpu_s = max(0.0, (used[0] if used else 0.0) - before[2])
    cpu_s = max(0.0, (used[1] if used else 0.0) - before[3])
    # the first start of this life: of a later life of a replica, the first since the life
    # before it ended; of the first life, the first of all (a tick whose clock was read
    # before the submit committed may start it a moment "before" it was submitted)
    since = begin if before[0] else float("-inf")
    first = tx._sql(
        "SELECT MIN(started_at) FROM workers WHERE run = ? AND started_at >= ?", (name, since)
    ).fetchone()[0]
    gpus = tx._sql(
        "SELECT TOTAL(json_array_length(gpus)) FROM workers WHERE run = ? AND attempt = ?",
        (name, run["attempts"]),
    ).fetchone()[0]
    wait = None if first is None else max(0.0, first - begin)
    ran = tx._sql(
        f"SELECT TOTAL(seconds) FROM (SELECT {attempt_seconds('COALESCE(finished_at, ?)')}"
        " AS seconds FROM workers WHERE run = ? AND started_at >= ? GROUP BY attempt)",
        (run["finished_at"], name, since),
    ).fetchone()[0]
    a = _asked(tx, name)
    tx._sql(
        "INSERT INTO usage_records (run_uid, run, workspace, owner, outcome, exit_code,"
        " submitted_at, started_at, finished_at, gpus, gpu_seconds, cpu_seconds,"
        " wait_seconds, preemptions, restarts, priority, time_limit_seconds, workers,"
        " gpu_memory, cpus, memory, run_seconds)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            uid,
            name,
            run["workspace"],
            run["owner"],
            run["state"],
            run["exit_code"],
            begin,
            first,
            run["finished_at"],
            int(gpus),
            gpu_s,
            cpu_s,
            wait,
            max(0, run["preemptions"] - int(before[4])),
            run["restarts"],
            run["priority"],
            a.time_limit_seconds,
            a.workers,
            a.gpu_memory,
            a.cpus,
            a.memory,
            float(ran),
        ),
    )


class Usage:
    """Reads and writes of ``usage`` (the running totals) and ``usage_records``."""

    def __init__(self, core: Core) -> None:
        self._core = core
        # every record finished before this was found to be of a run the store holds (or was
        # pruned): the next look starts here, not at the oldest of a year of records; a run
        # forgotten moves it back to that run's record (forgotten())
        self._looked = -math.inf

    def add(self, tx: Tx, run: RunRow, gpu_s: float, cpu_s: float) -> None:
        """Add to the run's usage, kept by its id: it outlives the run being forgotten."""
        tx._sql(
            "INSERT INTO usage (run_uid, run, workspace, gpu_seconds, cpu_seconds)"
            " VALUES (?,?,?,?,?) ON CONFLICT (run_uid) DO UPDATE SET"
            " gpu_seconds = gpu_seconds + ?, cpu_seconds = cpu_seconds + ?",
            (run.run_uid, run.name, run.workspace, gpu_s, cpu_s, gpu_s, cpu_s),
        )

    def by_workspace(self) -> dict[str, tuple[float, float]]:
        rows = self._core.connect().execute(
            "SELECT workspace, SUM(gpu_seconds), SUM(cpu_seconds) FROM usage GROUP BY workspace"
        )
        return {r[0]: (r[1], r[2]) for r in rows}

    def records(
        self, since: float, workspaces: frozenset[str] | None = None, limit: int | None = None
    ) -> list[UsageRecord]:
        """Records of runs finished at ``since`` or later, oldest first (``limit``: the
        newest that many); of ``workspaces`` only when given (None: every workspace)."""
        sql, args = "SELECT * FROM usage_records WHERE finished_at >= ?", [since]
        if workspaces is not None:
            sql += " AND workspace IN (SELECT value FROM json_each(?))"
            args.append(_json_list(workspaces))  # type: ignore[arg-type]  # mixed parameters
        if limit is not None:
            sql = f"SELECT * FROM ({sql} ORDER BY finished_at DESC, id DESC LIMIT ?)"
            args.append(limit)
        rows = self._core.connect().execute(sql + " ORDER BY finished_at, id", args)
        return [_record(r) for r in rows]

    def sums(self, since: float) -> list[UsageSum]:
        """The records of runs finished at ``since`` or later, added up by workspace,
        owner and outcome."""
        rows = self._core.connect().execute(
            "SELECT workspace, owner, outcome, COUNT(*), TOTAL(gpu_seconds), TOTAL(cpu_seconds),"
            " TOTAL(preemptions), TOTAL(restarts) FROM usage_records WHERE finished_at >= ?"
            " GROUP BY workspace, owner, outcome ORDER BY workspace, owner, outcome",
            (since,),
        )
        return [
            UsageSum(
                workspace=r[0],
                owner=r[1],
                outcome=RunState(r[2]),
                runs=r[3],
                gpu_seconds=r[4],
                cpu_seconds=r[5],
                preemptions=int(r[6]),
                restarts=int(r[7]),
            )
            for r in rows
        ]

    def waits(self, since: float) -> list[tuple[str, str, float]]:
        """(workspace, owner, wait) of each run finished at ``since`` or later that started."""
        sql = (
            "SELECT workspace, owner, wait_seconds FROM usage_records"
            " WHERE finished_at >= ? AND wait_seconds IS NOT NULL"
        )
        return [(r[0], r[1], r[2]) for r in self._core.connect().execute(sql, (since,))]

    def daily(self, since: float, until: float) -> list[tuple[str, str, int, float]]:
        """(workspace, owner, day, GPU-seconds) of runs finished from ``since`` to ``until``,
        day 0 the 24 hours before ``until``, day 1 the 24 before those, and so on."""
        sql = (
            "SELECT workspace, owner, CAST((? - finished_at) / 86400 AS INTEGER) AS day,"
            " TOTAL(gpu_seconds) FROM usage_records WHERE finished_at >= ? AND finished_at <= ?"
            " GROUP BY workspace, owner, day"
        )
        rows = self._core.connect().execute(sql, (until, since, until))
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    def expired(self, before: float) -> bool:
        """Whether a record of a run the store no longer holds finished before ``before``."""
        since = self._looked
        sql = f"SELECT 1 FROM {_EXPIRED} AND u.finished_at >= ? LIMIT 1"
        found = self._core.connect().execute(sql, (before, since)).fetchone() is not None
        if not found:
            self._looked = max(since, before)
        return found

    def forgotten(self, tx: Tx, run_uid: str) -> None:
        """Within the transaction that forgets the run ``run_uid``: its record may expire
        now, so the next look at expired records goes back to it."""
        sql = "SELECT MIN(finished_at) FROM usage_records WHERE run_uid = ?"
        row = tx._sql(sql, (run_uid,)).fetchone()
        if row is not None and row[0] is not None:
            self._looked = min(self._looked, float(row[0]))

    def prune(self, tx: Tx, before: float, limit: int) -> int:
        """Forget up to ``limit`` records of runs finished before ``before`` that the store no
        longer holds; how many. (The running totals in ``usage`` stay, as before.)"""
        sql = f"DELETE FROM usage_records WHERE id IN (SELECT id FROM {_EXPIRED} LIMIT ?)"
        return int(tx._sql(sql, (before, limit)).rowcount)


def _json_list(values: frozenset[str]) -> str:
    return json.dumps(sorted(values))
