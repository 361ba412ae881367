"""The telemetry history in a real SQLite store (runner/store/telemetry.py): samples
written in batches, 5-minute means and peaks, pruning by age and by count, reads bounded,
a run's means and peaks over its life, and the sampler's rings back after a restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.store import telemetry as th
from runner.store.db import Store
from runner.store.telemetry import BUCKET, FULL_KEPT, GpuSample, RunSample
from runner.telemetry.history import Recorder
from runner.telemetry.sampler import Sampler
from runner.telemetry.workers import LiveWorker

T0 = 1_800_000_000.0  # a bucket's start (divisible by 300)


def _gpu(at: float, util: float, gpu: int = 0) -> GpuSample:
    return GpuSample(
        at=at,
        gpu=gpu,
        utilization=util,
        memory_used=int(util) << 20,
        temperature=40.0,
        power_watts=100.0 + util,
    )


def _run(at: float, cpu: float, uid: str = "uid-a", memory: int = 1 << 30) -> RunSample:
    return RunSample(
        at=at,
        run_uid=uid,
        workspace="vision",
        gpus=(0,),
        cpu_percent=cpu,
        memory_bytes=memory,
        gpu_memory_bytes=2 << 30,
        gpu_util=cpu / 2,
    )


def _count(store: Store, table: str, coarse: int) -> int:
    sql = f"SELECT COUNT(*) FROM {table} WHERE coarse = ?"
    return int(store._connect().execute(sql, (coarse,)).fetchone()[0])


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "state.db")


def test_samples_read_back_per_gpu_and_run_oldest_first(store: Store) -> None:
    th.write_samples(store, [_gpu(T0 + i, i, g) for i in range(5) for g in (0, 1)],
                     [_run(T0 + i, 10.0 * i) for i in range(5)])  # fmt: skip
    gpus = th.gpu_series(store, T0, T0 + 10, points=100)
    assert sorted(gpus) == [0, 1]
    assert [g.utilization for g in gpus[1]] == [0, 1, 2, 3, 4]
    assert gpus[0][2].memory_used == 2 << 20 and gpus[0][2].power_watts == 102.0
    runs = th.run_series(store, ["uid-a"], T0 + 2, T0 + 10, points=100)
    assert [r.cpu_percent for r in runs["uid-a"]] == [20.0, 30.0, 40.0]
    assert runs["uid-a"][0].workspace == "vision" and runs["uid-a"][0].gpus == (0,)
    assert th.run_series(store, ["uid-other"], T0, T0 + 10) == {}


def test_a_read_returns_at_most_the_points_asked_averaged(store: Store) -> None:
    th.write_samples(store, [_gpu(T0 + i, i % 2 * 100) for i in range(1000)], [])
    series = th.gpu_series(store, T0, T0 + 1000, points=50)[0]
    assert 49 <= len(series) <= 51
    assert all(g.utilization == pytest.approx(50.0) for g in series)  # 0 and 100, averaged


def test_closed_buckets_become_means_and_peaks_and_old_rows_go(store: Store) -> None:
    # 3 buckets of 5-second samples; the last one still open
    th.write_samples(
        store, [_gpu(T0 + s, 10.0 if s % 10 else 90.0) for s in range(0, 900, 5)],
        [_run(T0 + s, float(s % 300)) for s in range(0, 900, 5)],
    )  # fmt: skip
    th.maintain(store, T0 + 900, written_until=T0 + 895)
    coarse = (
        store._connect()
        .execute(
            "SELECT at, samples, utilization, utilization_peak FROM telemetry_gpus"
            " WHERE coarse = 1 ORDER BY at"
        )
        .fetchall()
    )
    assert [tuple(r) for r in coarse] == [(T0, 60, 50.0, 90.0), (T0 + BUCKET, 60, 50.0, 90.0)]
    runs = (
        store._connect()
        .execute("SELECT samples, cpu_peak, memory_peak FROM telemetry_runs WHERE coarse = 1")
        .fetchall()
    )
    assert [tuple(r) for r in runs] == [(60, 295.0, 1 << 30)] * 2
    th.maintain(store, T0 + 900, written_until=T0 + 895)  # again: nothing made twice
    assert _count(store, "telemetry_gpus", 1) == 2
    # a day later the full rows are gone, the coarse ones stay; a month later those too
    th.maintain(store, T0 + FULL_KEPT + 900, written_until=T0 + 895)
    assert _count(store, "telemetry_gpus", 0) == 0 and _count(store, "telemetry_runs", 0) == 0
    assert _count(store, "telemetry_gpus", 1) == 3  # the open bucket closed with them
    assert th.gpu_series(store, T0, T0 + FULL_KEPT, points=10)[0][0].utilization == 50.0
    th.maintain(store, T0 + 32 * 86_400, written_until=T0 + 895)
    assert _count(store, "telemetry_gpus", 1) == 0 and _count(store, "telemetry_runs", 1) == 0


def test_rows_past_the_bound_go_oldest_first(store: Store) -> None:
    th.write_samples(store, [_gpu(T0 + i, 1.0) for i in range(500)],
                     [_run(T0 + i, 1.0) for i in range(500)])  # fmt: skip
    th.maintain(store, T0 + 500, T0 + 499, full_rows=100, coarse_rows=1)
    assert _count(store, "telemetry_gpus", 0) == 100 and _count(store, "telemetry_runs", 0) == 100
    assert _count(store, "telemetry_gpus", 1) == 1
    oldest = (
        store._connect()
        .execute("SELECT MIN(at) FROM telemetry_runs WHERE coarse = 0")
        .fetchone()[0]
    )
    assert oldest == T0 + 400


def test_a_runs_summary_counts_each_sample_once(store: Store) -> None:
    start = T0 + 7  # its first sample, 7 s into a bucket
    rows = [_run(start + s, 10.0, memory=(1 << 30) + s) for s in range(0, 595, 5)]
    rows += [_run(start + 600 + s, 70.0, memory=4 << 30) for s in range(0, 60, 5)]
    th.write_samples(store, [], [*rows, _run(T0, 999.0, uid="uid-b")])
    th.maintain(store, T0 + 700, written_until=T0 + 667)  # two buckets coarse, full kept
    assert _count(store, "telemetry_runs", 1) == 3  # uid-a's two, uid-b's one
    summary = th.run_summary(store, "uid-a")
    assert summary is not None and summary.samples == 131
    assert summary.first_at == start and summary.last_at == start + 655
    assert summary.mean[0] == pytest.approx((119 * 10.0 + 12 * 70.0) / 131)
    assert summary.peak[0] == 70.0 and summary.peak[1] == 4 << 30
    assert th.run_summary(store, "uid-none") is None


def test_the_recorder_batches_by_time_and_a_read_sees_everything(store: Store) -> None:
    recorder = Recorder(store, flush_seconds=30, wall=lambda: T0 + 100)
    for i in range(6):  # 25 seconds: nothing written yet
        recorder.add(T0 + 5 * i, [_gpu(T0 + 5 * i, 1.0)], [_run(T0 + 5 * i, 1.0)])
    assert _count(store, "telemetry_gpus", 0) == 0
    recorder.add(T0 + 30, [_gpu(T0 + 30, 1.0)], [])  # 30 s after the first: one transaction
    assert _count(store, "telemetry_gpus", 0) == 7 and recorder.last_write_ms > 0
    recorder.add(T0 + 35, [_gpu(T0 + 35, 3.0)], [_run(T0 + 35, 90.0)])
    series = recorder.gpu_series(T0)[0]  # the store's and the one still waiting
    assert len(series) == 8 and series[-1].utilization == 3.0
    assert _count(store, "telemetry_gpus", 0) == 7  # a read writes nothing
    summary = recorder.run_summary("uid-a")
    assert summary is not None and summary.samples == 7 and summary.last_at == T0 + 35
    assert summary.mean[0] == pytest.approx((6 * 1.0 + 90.0) / 7) and summary.peak[0] == 90.0
    assert [r.cpu_percent for r in recorder.run_series(["uid-a"], T0 + 20)["uid-a"]] == [
        1.0, 1.0, 90.0,
    ]  # fmt: skip
    coarse = recorder.gpu_series(T0, points=2)[0]  # a span the store has keeps its mean
    assert len(coarse) <= 3


def _live() -> list[LiveWorker]:
    return [LiveWorker("train", "uid-a", "vision", (1,), None)]


def test_the_rings_come_back_from_the_store_after_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    clock = [T0]
    first = Sampler(5.0, (0, 1), True, _live, wall=lambda: clock[0],
                    recorder=Recorder(Store(path), wall=lambda: clock[0]))  # fmt: skip
    for _ in range(4):
        first.sample_once()
        clock[0] += 5
    first.stop()  # writes what waits
    again = Sampler(5.0, (0, 1), True, _live, wall=lambda: clock[0],
                    recorder=Recorder(Store(path), wall=lambda: clock[0]))  # fmt: skip
    before = first.gpu_history(1)
    after = again.gpu_history(1)
    assert [t for t, _ in after] == [t for t, _ in before]
    assert [g.utilization for _, g in after] == [g.utilization for _, g in before]
    assert [r.cpu_percent for _, r in again.run_history("uid-a")] == [
        r.cpu_percent for _, r in first.run_history("uid-a")
    ]
    again.sample_once()  # the run still runs: its ring goes on
    assert len(again.run_history("uid-a")) == 5
