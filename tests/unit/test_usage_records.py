"""Usage records (runner/store/usage.py) in a real SQLite store, the since= forms, the
percentiles, and the wire shapes of GET /v1/usage and GET /v1/history."""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import replace
from pathlib import Path

import msgspec
import pytest

from runner.api.usage import history_entry, usage_row
from runner.model import RunState, WorkerState
from runner.reasons import Reason, ReasonCode
from runner.runspec.build import run_document
from runner.schema import History, Usage
from runner.service.caller import ServiceError
from runner.service.usage import UsageTotals, percentile, since_time
from runner.store.db import MIGRATIONS, SCHEMA_APPLICATION_ID, RunRow, Store, UsageRecord
from runner.store.usage import USAGE_KEPT, UsageSum
from tests.unit.store_rows import queued_row

NOW = 1_790_000_000.0


def _run(name: str = "train") -> RunRow:
    return queued_row(name, "{}", NOW, workspace="vision", owner="ann", uid=1000, gid=1000,
                      run_uid="ab" * 16)  # fmt: skip


def _life(store: Store, attempt: int, start: float, gpu_s: float, end: float) -> None:
    """One attempt of the run: started at ``start`` on two GPUs, ``gpu_s`` used, done."""
    run = store.runs.get("train")
    assert run is not None
    with store.transaction() as tx:
        store.runs.claim_start(tx, "train", attempt, RunState.STARTING, start, backfilled=False)
        store.workers.insert(tx, "train", attempt, 0, (0, 1), 2000, 1 << 30, start)
    with store.transaction() as tx:
        (w,) = [w for w in store.workers.of("train") if w.attempt == attempt]
        store.workers.end(tx, w.id, WorkerState.EXITED, end, exit_code=0)
        store.usage.add(tx, run, gpu_s, gpu_s)
    with store.transaction() as tx:
        store.runs.finish(tx, "train", RunState.SUCCEEDED, end, None, exit_code=0)


def test_a_finish_writes_one_record_and_a_replicas_next_life_only_its_own(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "state.db")
    store.runs.insert(_run())
    _life(store, 1, NOW + 10, 100.0, NOW + 60)
    with store.transaction() as tx:  # finished again without moving: no second record
        store.runs.finish(tx, "train", RunState.SUCCEEDED, NOW + 61, None, exit_code=0)
    (first,) = store.usage.records(0)
    assert (first.outcome, first.exit_code, first.gpus) == (RunState.SUCCEEDED, 0, 2)
    assert (first.started_at, first.wait_seconds, first.gpu_seconds) == (NOW + 10, 10.0, 100.0)
    with store.transaction() as tx:  # a replica queued again as new
        store.runs.restart_replica(tx, "train", Reason("again", code=ReasonCode.MESSAGE), 0, 0)
    _life(store, 2, NOW + 100, 30.0, NOW + 130)
    second = store.usage.records(0)[1]
    assert second.gpu_seconds == 30.0 and second.cpu_seconds == 30.0  # this life's alone
    assert (second.submitted_at, second.wait_seconds) == (NOW + 60, 40.0)  # since the last
    assert [r.run for r in store.usage.records(NOW + 100)] == ["train"]
    assert store.usage.records(0, frozenset({"nlp"})) == []
    assert [r.id for r in store.usage.records(0, None, 1)] == [second.id]  # the newest


def test_a_queued_run_cancelled_leaves_a_record_without_a_start(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    store.runs.insert(_run())
    with store.transaction() as tx:
        store.runs.cancel_queued(tx, "train", NOW + 5)
    (r,) = store.usage.records(0)
    assert (r.outcome, r.started_at, r.wait_seconds, r.gpu_seconds) == (
        RunState.CANCELLED, None, None, 0.0
    )  # fmt: skip


def test_old_records_go_only_once_their_run_is_forgotten(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    store.runs.insert(_run())
    _life(store, 1, NOW + 10, 1.0, NOW + 20)
    later = NOW + USAGE_KEPT + 100
    assert not store.usage.expired(later - USAGE_KEPT)  # its run is still held
    with store.transaction() as tx:
        store.runs.delete(tx, "train")
    assert store.usage.records(0)  # forgotten, its record stays
    assert store.usage.expired(later - USAGE_KEPT)
    with store.transaction() as tx:
        assert store.usage.prune(tx, later - USAGE_KEPT, 100) == 1
    assert store.usage.records(0) == []


@pytest.mark.parametrize(
    ("text", "back"),
    [("7d", 7 * 86400), ("12h", 43200), ("90m", 5400), ("2w", 14 * 86400), (None, 7 * 86400),
     ("1h30m", 5400), ("9999d", USAGE_KEPT)],
)  # fmt: skip
def test_since_as_a_span(text: str | None, back: float) -> None:
    assert since_time(text, NOW) == NOW - back


def test_since_as_a_utc_date_or_time() -> None:
    now = time.time()
    day = time.strftime("%Y-%m-%d", time.gmtime(now - 86400))
    assert since_time(day, now) == pytest.approx(now - 86400, abs=86400)
    assert since_time("2026-10-01T12:00:00Z", NOW + 10**6) == 1790856000.0
    assert since_time("2026-10-01T14:00+02:00", NOW + 10**6) == 1790856000.0
    assert since_time("2026-10-01T12:00", NOW + 10**6) == 1790856000.0  # UTC when bare


@pytest.mark.parametrize("text", ["last tuesday", "7", "-7d", "7x", "x" * 65, "2026-13-01"])
def test_a_since_that_is_no_time_is_400(text: str) -> None:
    with pytest.raises(ServiceError) as e:
        since_time(text, NOW)
    assert e.value.status == 400 and e.value.code == "BAD_REQUEST"
    assert e.value.message.startswith("since:")


def test_nearest_rank_percentiles() -> None:
    assert percentile([], 0.5) is None
    assert percentile([5.0], 0.95) == 5.0
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 0.5), percentile(values, 0.95)) == (50.0, 95.0)
    assert percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.0


RECORD = UsageRecord(
    id=7,
    run_uid="ab" * 16,
    run="train",
    workspace="vision",
    owner="ann",
    outcome=RunState.FAILED,
    exit_code=3,
    submitted_at=NOW,
    started_at=NOW + 10,
    finished_at=NOW + 3610,
    gpus=2,
    gpu_seconds=7200.0,
    cpu_seconds=14400.0,
    wait_seconds=10.0,
    preemptions=1,
    restarts=2,
    priority=5,
    time_limit_seconds=7200,
    workers=2,
    gpu_memory=None,
    cpus=2.0,
    memory=8 << 30,
    run_seconds=3600.0,
)


def test_the_wire_shapes_byte_for_byte() -> None:
    totals = UsageTotals("vision")
    totals.add(
        UsageSum(
            workspace="vision",
            owner="ann",
            outcome=RunState.FAILED,
            runs=1,
            gpu_seconds=7200.0,
            cpu_seconds=14400.0,
            preemptions=1,
            restarts=2,
        )
    )
    totals.waits.append(10.0)
    usage = Usage(since="2026-09-14T00:00:00Z", until="2026-09-21T00:00:00Z", by="workspace",
                  rows=[usage_row(totals)], total=usage_row(totals))  # fmt: skip
    assert msgspec.json.encode(usage.rows[0]) == (
        b'{"workspace":"vision","user":null,"visible":true,"runs":1,'
        b'"outcomes":{"succeeded":0,"failed":1,"cancelled":0},"gpu_hours":2.0,'
        b'"core_hours":4.0,"preemptions":1,"restarts":2,"wait_p50_seconds":10.0,'
        b'"wait_p95_seconds":10.0}'
    )
    assert msgspec.json.decode(msgspec.json.encode(usage), type=Usage) == usage
    entry = history_entry(RECORD)
    assert msgspec.json.encode(entry) == (
        b'{"uid":"' + b"ab" * 16 + b'","name":"train","workspace":"vision","owner":"ann",'
        b'"outcome":"Failed","exit_code":3,"submitted_at":"2026-09-21T14:13:20Z",'
        b'"started_at":"2026-09-21T14:13:30Z","finished_at":"2026-09-21T15:13:30Z",'
        b'"elapsed_seconds":3600.0,"wait_seconds":10.0,"gpus":2,"gpu_hours":2.0,'
        b'"core_hours":4.0,"preemptions":1,"restarts":2,"priority":5,'
        b'"time_limit_seconds":7200,"workers":2,"gpu_memory_bytes":null,"cpus":2.0,'
        b'"memory_bytes":8589934592,"run_seconds":3600.0}'
    )
    history = History(since="2026-09-14T00:00:00Z", runs=[entry])
    assert msgspec.json.decode(msgspec.json.encode(history), type=History) == history


def _attempt(store: Store, attempt: int, start: float, ends: tuple[float, ...]) -> None:
    """One attempt of ``train``: a worker started at ``start`` for each end in ``ends``."""
    with store.transaction() as tx:
        store.runs.claim_start(tx, "train", attempt, RunState.STARTING, start, backfilled=False)
        for worker in range(len(ends)):
            store.workers.insert(tx, "train", attempt, worker, (worker,), 2000, 4 << 30, start)
    with store.transaction() as tx:
        for w in [w for w in store.workers.of("train") if w.attempt == attempt]:
            store.workers.end(tx, w.id, WorkerState.EXITED, ends[w.worker], exit_code=0)


def test_a_record_keeps_what_the_run_asked_and_how_long_its_workers_ran(
    tmp_path: Path,
) -> None:
    document = run_document(
        "train", ["python", "train.py"], gpus=1, cpus=2, memory="4GiB",
        time_limit_seconds=600, priority=7, workspace="vision", workers=2, gpu_memory="20GiB",
    )  # fmt: skip
    store = Store(tmp_path / "state.db")
    store.runs.insert(replace(_run(), spec_text=json.dumps(document), priority=7))
    _attempt(store, 1, NOW + 10, (NOW + 20, NOW + 30))  # preempted: 10 s and 20 s
    _attempt(store, 2, NOW + 40, (NOW + 70, NOW + 70))  # 30 s each
    with store.transaction() as tx:
        store.runs.finish(tx, "train", RunState.SUCCEEDED, NOW + 70, None, exit_code=0)
    (r,) = store.usage.records(0)
    assert (r.priority, r.time_limit_seconds, r.workers) == (7, 600, 2)
    assert (r.gpu_memory, r.cpus, r.memory) == (20 << 30, 2.0, 4 << 30)
    assert r.run_seconds == 15.0 + 30.0  # each attempt's mean worker time, summed
    entry = history_entry(r)
    assert (entry.gpu_memory_bytes, entry.memory_bytes, entry.run_seconds) == (
        20 << 30, 4 << 30, 45.0,
    )  # fmt: skip

    with store.transaction() as tx:  # a replica's next life: its own time only
        store.runs.restart_replica(tx, "train", Reason("again", code=ReasonCode.MESSAGE), 0, 7)
    _attempt(store, 3, NOW + 100, (NOW + 105, NOW + 105))
    with store.transaction() as tx:
        store.runs.finish(tx, "train", RunState.FAILED, NOW + 105, None, exit_code=1)
    assert store.usage.records(0)[1].run_seconds == 5.0


def test_a_record_of_a_spec_it_cannot_read_takes_the_defaults(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    store.runs.insert(_run())  # its spec is {}
    with store.transaction() as tx:
        store.runs.cancel_queued(tx, "train", NOW + 5)
    (r,) = store.usage.records(0)
    assert (r.time_limit_seconds, r.workers, r.gpu_memory, r.cpus, r.memory) == (
        None, 1, None, 0.0, None,
    )  # fmt: skip
    assert r.run_seconds == 0.0


def test_migration_16_fills_what_older_records_can_tell(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for script in MIGRATIONS[:15]:
        conn.executescript(script)
    conn.execute("PRAGMA user_version = 15")
    conn.execute(f"PRAGMA application_id = {SCHEMA_APPLICATION_ID}")
    conn.execute(
        "INSERT INTO runs (name, workspace, owner, uid, gid, spec, priority, state,"
        " submitted_at, run_uid) VALUES ('held', 'w', 'ann', 1, 1, '{}', 9, 'Succeeded', 0,"
        " 'held-uid')"
    )
    for worker in (0, 1):
        conn.execute(
            "INSERT INTO workers (run, attempt, worker, state, gpus, cpu_milli, memory,"
            f" started_at) VALUES ('held', 1, {worker}, 'Exited', '[{worker}]', 1500, 1024, 0)"
        )
    records = [  # run_uid, started_at, gpus, gpu_seconds
        ("held-uid", 1.0, 2, 100.0),
        ("forgotten", 1.0, 4, 400.0),
        ("no-gpus", 1.0, 0, 0.0),
        ("never", None, 0, 0.0),
    ]
    for uid, started, gpus, gpu_s in records:
        conn.execute(
            "INSERT INTO usage_records (run_uid, run, workspace, owner, outcome, submitted_at,"
            " started_at, finished_at, gpus, gpu_seconds) VALUES (?, ?, 'w', 'ann',"
            " 'Succeeded', 0, ?, 60, ?, ?)",
            (uid, uid, started, gpus, gpu_s),
        )
    conn.close()
    store = Store(path)
    got = {r.run_uid: r for r in store.usage.records(0)}
    held, forgotten = got["held-uid"], got["forgotten"]
    assert (held.priority, held.workers, held.cpus, held.memory) == (9, 2, 1.5, 1024)
    assert held.run_seconds == 50.0  # its GPU-seconds over its GPUs
    assert (forgotten.priority, forgotten.workers, forgotten.cpus, forgotten.memory) == (
        0, 1, 0.0, None,
    )  # fmt: skip
    assert forgotten.run_seconds == 100.0
    assert (got["no-gpus"].run_seconds, got["never"].run_seconds) == (None, 0.0)
    assert {r.time_limit_seconds for r in got.values()} == {None}
    assert {r.gpu_memory for r in got.values()} == {None}
    assert history_entry(got["no-gpus"]).run_seconds is None
