"""Usage records (runner/store/usage.py) in a real SQLite store, the since= forms, the
percentiles, and the wire shapes of GET /v1/usage and GET /v1/history."""

from __future__ import annotations

import time
from pathlib import Path

import msgspec
import pytest

from runner.api.usage import history_entry, usage_row
from runner.model import RunState, WorkerState
from runner.reasons import Reason, ReasonCode
from runner.schema import History, Usage
from runner.service.caller import ServiceError
from runner.service.usage import UsageTotals, percentile, since_time
from runner.store.db import RunRow, Store, UsageRecord
from runner.store.usage import USAGE_KEPT, UsageSum

NOW = 1_790_000_000.0


def _run(name: str = "train") -> RunRow:
    return RunRow(
        name, "vision", "ann", 1000, 1000, "{}", 0, RunState.QUEUED, None, NOW, None, None,
        None, 0, 0, 0, None, None, False, run_uid="ab" * 16,
    )  # fmt: skip


def _life(store: Store, attempt: int, start: float, gpu_s: float, end: float) -> None:
    """One attempt of the run: started at ``start`` on two GPUs, ``gpu_s`` used, done."""
    run = store.get_run("train")
    assert run is not None
    with store.transaction() as tx:
        store.claim_start(tx, "train", attempt, RunState.STARTING, start, backfilled=False)
        store.insert_worker(tx, "train", attempt, 0, (0, 1), 2000, 1 << 30, start)
    with store.transaction() as tx:
        (w,) = [w for w in store.workers_of("train") if w.attempt == attempt]
        store.end_worker(tx, w.id, WorkerState.EXITED, end, exit_code=0)
        store.add_usage(tx, run, gpu_s, gpu_s)
    with store.transaction() as tx:
        store.finish_run(tx, "train", RunState.SUCCEEDED, end, None, exit_code=0)


def test_a_finish_writes_one_record_and_a_replicas_next_life_only_its_own(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "state.db")
    store.insert_run(_run())
    _life(store, 1, NOW + 10, 100.0, NOW + 60)
    with store.transaction() as tx:  # finished again without moving: no second record
        store.finish_run(tx, "train", RunState.SUCCEEDED, NOW + 61, None, exit_code=0)
    (first,) = store.usage_records(0)
    assert (first.outcome, first.exit_code, first.gpus) == (RunState.SUCCEEDED, 0, 2)
    assert (first.started_at, first.wait_seconds, first.gpu_seconds) == (NOW + 10, 10.0, 100.0)
    with store.transaction() as tx:  # a replica queued again as new
        store.restart_replica(tx, "train", Reason("again", code=ReasonCode.MESSAGE), 0, 0)
    _life(store, 2, NOW + 100, 30.0, NOW + 130)
    second = store.usage_records(0)[1]
    assert second.gpu_seconds == 30.0 and second.cpu_seconds == 30.0  # this life's alone
    assert (second.submitted_at, second.wait_seconds) == (NOW + 60, 40.0)  # since the last
    assert [r.run for r in store.usage_records(NOW + 100)] == ["train"]
    assert store.usage_records(0, frozenset({"nlp"})) == []
    assert [r.id for r in store.usage_records(0, None, 1)] == [second.id]  # the newest


def test_a_queued_run_cancelled_leaves_a_record_without_a_start(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    store.insert_run(_run())
    with store.transaction() as tx:
        store.cancel_queued(tx, "train", NOW + 5)
    (r,) = store.usage_records(0)
    assert (r.outcome, r.started_at, r.wait_seconds, r.gpu_seconds) == (
        RunState.CANCELLED, None, None, 0.0
    )  # fmt: skip


def test_old_records_go_only_once_their_run_is_forgotten(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    store.insert_run(_run())
    _life(store, 1, NOW + 10, 1.0, NOW + 20)
    later = NOW + USAGE_KEPT + 100
    assert not store.usage_expired(later - USAGE_KEPT)  # its run is still held
    with store.transaction() as tx:
        store.delete_run_row(tx, "train")
    assert store.usage_records(0)  # forgotten, its record stays
    assert store.usage_expired(later - USAGE_KEPT)
    with store.transaction() as tx:
        assert store.prune_usage(tx, later - USAGE_KEPT, 100) == 1
    assert store.usage_records(0) == []


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


RECORD = UsageRecord(7, "ab" * 16, "train", "vision", "ann", RunState.FAILED, 3, NOW,
                     NOW + 10, NOW + 3610, 2, 7200.0, 14400.0, 10.0, 1, 2)  # fmt: skip


def test_the_wire_shapes_byte_for_byte() -> None:
    totals = UsageTotals("vision")
    totals.add(UsageSum("vision", "ann", RunState.FAILED, 1, 7200.0, 14400.0, 1, 2))
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
        b'"core_hours":4.0,"preemptions":1,"restarts":2}'
    )
    history = History(since="2026-09-14T00:00:00Z", runs=[entry])
    assert msgspec.json.decode(msgspec.json.encode(history), type=History) == history
