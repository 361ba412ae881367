"""Telemetry history: each GPU's and each running run's samples, kept bounded.

Every sample is kept for FULL_KEPT seconds (a day) in ``telemetry_gpus`` and
``telemetry_runs`` (``coarse`` 0); each closed BUCKET (5 minutes) is also kept as one
``coarse`` row of its means and peaks, at its first sample's time, with the number of
samples it holds, for COARSE_KEPT seconds (a month). A run's rows are keyed by its
uid, never its name, and carry its workspace, so that who may see them is decided
without the run (which may be forgotten). Rows past their age go, and past
MAX_FULL_ROWS / MAX_COARSE_ROWS the oldest go first, whatever their age. A read
returns at most MAX_POINTS samples per series, averaged over equal spans when there
are more.

The telemetry thread writes many samples in one transaction (``write_samples``) and
keeps the tables (``maintain``); every statement is here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from runner.store.db import Store
from runner.store.tx import Tx

__all__ = [
    "BUCKET",
    "COARSE_KEPT",
    "FULL_KEPT",
    "MAX_COARSE_ROWS",
    "MAX_FULL_ROWS",
    "MAX_POINTS",
    "GpuSample",
    "RunSample",
    "RunSummary",
    "gpu_series",
    "maintain",
    "run_series",
    "run_summary",
    "span_key",
    "write_samples",
]

FULL_KEPT = 86_400.0  # seconds every sample is kept
COARSE_KEPT = 31 * 86_400.0  # seconds the 5-minute means and peaks are kept
BUCKET = 300.0  # seconds one coarse row stands for
MAX_FULL_ROWS = 1_000_000  # rows of each table at full rate, at most (about 100 bytes each)
MAX_COARSE_ROWS = 500_000  # coarse rows of each table, at most
MAX_POINTS = 2_000  # samples one read returns per GPU or run, at most

_GPU_FIELDS = ("utilization", "memory_used", "temperature", "power_watts")
_RUN_FIELDS = ("cpu_percent", "memory_bytes", "gpu_memory_bytes", "gpu_util")
_RUN_PEAKS = ("cpu_peak", "memory_peak", "gpu_memory_peak", "gpu_util_peak")


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU at ``at`` (Unix seconds): a sample, or the mean of several."""

    at: float
    gpu: int
    utilization: float | None
    memory_used: int | None
    temperature: float | None
    power_watts: float | None


@dataclass(frozen=True, slots=True)
class RunSample:
    """One run (by uid) at ``at``: a sample, or the mean of several."""

    at: float
    run_uid: str
    workspace: str
    gpus: tuple[int, ...]
    cpu_percent: float | None
    memory_bytes: int | None
    gpu_memory_bytes: int | None
    gpu_util: float | None


@dataclass(frozen=True, slots=True)
class RunSummary:
    """A run's use over the samples kept of it: means (weighted by samples) and peaks."""

    samples: int
    first_at: float
    last_at: float
    mean: tuple[float | None, float | None, float | None, float | None]  # as _RUN_FIELDS
    peak: tuple[float | None, float | None, float | None, float | None]


def _int(value: float | None) -> int | None:
    return None if value is None else round(value)


# ------------------------------------------------------------------ writes


def write_samples(store: Store, gpus: Iterable[GpuSample], runs: Iterable[RunSample]) -> None:
    """Every row given, in one transaction."""
    gpu_rows = [
        (
            g.at,
            g.gpu,
            g.utilization,
            g.utilization,
            g.memory_used,
            g.memory_used,
            g.temperature,
            g.power_watts,
        )
        for g in gpus
    ]
    run_rows = [
        (
            r.at,
            r.run_uid,
            r.workspace,
            json.dumps(list(r.gpus)),
            r.cpu_percent,
            r.cpu_percent,
            r.memory_bytes,
            r.memory_bytes,
            r.gpu_memory_bytes,
            r.gpu_memory_bytes,
            r.gpu_util,
            r.gpu_util,
        )
        for r in runs
    ]
    if not gpu_rows and not run_rows:
        return
    with store.transaction() as tx:
        tx._many(
            "INSERT INTO telemetry_gpus (at, gpu, utilization, utilization_peak, memory_used,"
            " memory_peak, temperature, power_watts) VALUES (?,?,?,?,?,?,?,?)",
            gpu_rows,
        )
        tx._many(
            "INSERT INTO telemetry_runs (at, run_uid, workspace, gpus, cpu_percent, cpu_peak,"
            " memory_bytes, memory_peak, gpu_memory_bytes, gpu_memory_peak, gpu_util,"
            " gpu_util_peak) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            run_rows,
        )


def _coarse_until(store: Store, table: str) -> float | None:
    """Where the coarse rows of ``table`` end (None: there are none)."""
    sql = f"SELECT MAX(at) FROM {table} WHERE coarse = 1"
    newest = store._connect().execute(sql).fetchone()[0]
    return None if newest is None else math.floor(newest / BUCKET) * BUCKET + BUCKET


def _downsample(tx: Tx, table: str, start: float, end: float) -> None:
    bucket = f"CAST(at / {BUCKET} AS INTEGER)"
    if table == "telemetry_gpus":
        tx._sql(
            "INSERT INTO telemetry_gpus (at, coarse, samples, gpu, utilization,"
            " utilization_peak, memory_used, memory_peak, temperature, power_watts)"
            " SELECT MIN(at), 1, COUNT(*), gpu, AVG(utilization),"
            " MAX(utilization_peak), CAST(ROUND(AVG(memory_used)) AS INTEGER), MAX(memory_peak),"
            " AVG(temperature), AVG(power_watts) FROM telemetry_gpus"
            f" WHERE coarse = 0 AND at >= ? AND at < ? GROUP BY {bucket}, gpu",
            (start, end),
        )
    else:
        tx._sql(
            "INSERT INTO telemetry_runs (at, coarse, samples, run_uid, workspace, gpus,"
            " cpu_percent, cpu_peak, memory_bytes, memory_peak, gpu_memory_bytes,"
            " gpu_memory_peak, gpu_util, gpu_util_peak)"
            " SELECT MIN(at), 1, COUNT(*), run_uid, MAX(workspace), MAX(gpus),"
            " AVG(cpu_percent), MAX(cpu_peak), CAST(ROUND(AVG(memory_bytes)) AS INTEGER),"
            " MAX(memory_peak), CAST(ROUND(AVG(gpu_memory_bytes)) AS INTEGER),"
            " MAX(gpu_memory_peak), AVG(gpu_util), MAX(gpu_util_peak) FROM telemetry_runs"
            f" WHERE coarse = 0 AND at >= ? AND at < ? GROUP BY {bucket}, run_uid",
            (start, end),
        )


def _bound(tx: Tx, table: str, coarse: int, most: int) -> None:
    """Past ``most`` rows of this resolution, the oldest go."""
    count = tx._sql(f"SELECT COUNT(*) FROM {table} WHERE coarse = ?", (coarse,)).fetchone()[0]
    if count <= most:
        return
    cut = tx._sql(
        f"SELECT at FROM {table} WHERE coarse = ? ORDER BY at LIMIT 1 OFFSET ?",
        (coarse, count - most),
    ).fetchone()[0]
    tx._sql(f"DELETE FROM {table} WHERE coarse = ? AND at < ?", (coarse, cut), runs=False)


def maintain(
    store: Store,
    now: float,
    written_until: float,
    *,
    full_rows: int = MAX_FULL_ROWS,
    coarse_rows: int = MAX_COARSE_ROWS,
) -> None:
    """One transaction: the buckets closed before ``written_until`` (every sample before
    it is written) made coarse rows, then the rows past their age or their count removed.
    A bucket whose samples are about to go is made coarse first, closed or not."""
    closed = max(
        math.floor(written_until / BUCKET) * BUCKET,
        math.ceil((now - FULL_KEPT) / BUCKET) * BUCKET,
    )
    with store.transaction() as tx:
        for table in ("telemetry_gpus", "telemetry_runs"):
            start = _coarse_until(store, table)
            if start is None:
                oldest = tx._sql(f"SELECT MIN(at) FROM {table} WHERE coarse = 0").fetchone()[0]
                start = None if oldest is None else math.floor(oldest / BUCKET) * BUCKET
            if start is not None and start < closed:
                _downsample(tx, table, start, closed)
            old, ancient = now - FULL_KEPT, now - COARSE_KEPT  # a telemetry table, never runs
            tx._sql(f"DELETE FROM {table} WHERE coarse = 0 AND at < ?", (old,), runs=False)
            tx._sql(f"DELETE FROM {table} WHERE coarse = 1 AND at < ?", (ancient,), runs=False)
            _bound(tx, table, 0, full_rows)
            _bound(tx, table, 1, coarse_rows)


# ------------------------------------------------------------------ reads


def _source(store: Store, table: str, since: float) -> tuple[str, tuple[float, ...]]:
    """The rows that cover ``since`` onwards once each: coarse rows where the full ones
    are gone, full rows after them."""
    until = _coarse_until(store, table)
    oldest = store._connect().execute(f"SELECT MIN(at) FROM {table} WHERE coarse = 0").fetchone()[0]
    if until is None or (oldest is not None and since >= oldest):
        return "coarse = 0 AND at >= ?", (since,)
    if oldest is None:
        return "coarse = 1 AND at >= ?", (since,)
    cut = max(until, float(oldest))
    return "((coarse = 1 AND at >= ? AND at < ?) OR (coarse = 0 AND at >= ?))", (since, cut, cut)


def span_key(since: float, now: float, points: int | None) -> Callable[[float], float] | None:
    """The span a sample's time falls in, as a read of ``points`` groups them (None: each
    sample its own)."""
    if points is None:
        return None
    width = max((now - since) / max(1, points), 1e-6)
    return lambda at: float(int((at - since) / width))


def _group(since: float, now: float, points: int | None) -> tuple[str, tuple[float, ...]]:
    """Rows grouped into ``points`` equal spans (None: every row its own)."""
    if points is None:
        return "rowid", ()
    return "CAST((at - ?) / ? AS INTEGER)", (since, max((now - since) / max(1, points), 1e-6))


def gpu_series(
    store: Store, since: float, now: float, points: int | None = MAX_POINTS
) -> dict[int, list[GpuSample]]:
    """Each GPU's samples from ``since`` to ``now``, oldest first, at most ``points`` each
    (None: every row, for the last hour's rings)."""
    where, args = _source(store, "telemetry_gpus", since)
    group, width = _group(since, now, points)
    rows = store._connect().execute(
        "SELECT MIN(at), gpu, AVG(utilization), AVG(memory_used), AVG(temperature),"
        f" AVG(power_watts) FROM telemetry_gpus WHERE {where} AND at <= ?"
        f" GROUP BY gpu, {group} ORDER BY gpu, MIN(at)",
        (*args, now, *width),
    )
    found: dict[int, list[GpuSample]] = {}
    for r in rows:
        found.setdefault(r[1], []).append(
            GpuSample(
                at=r[0],
                gpu=r[1],
                utilization=r[2],
                memory_used=_int(r[3]),
                temperature=r[4],
                power_watts=r[5],
            )
        )
    return found


def run_series(
    store: Store,
    run_uids: Sequence[str] | None,
    since: float,
    now: float,
    points: int | None = MAX_POINTS,
) -> dict[str, list[RunSample]]:
    """Each run's samples (of ``run_uids``, None: every run) from ``since`` to ``now``,
    oldest first, at most ``points`` each (None: every row)."""
    where, args = _source(store, "telemetry_runs", since)
    group, width = _group(since, now, points)
    chosen, extra = "", tuple[str, ...]()
    if run_uids is not None:
        chosen = " AND run_uid IN (SELECT value FROM json_each(?))"
        extra = (json.dumps(list(run_uids)),)
    rows = store._connect().execute(
        "SELECT MIN(at), run_uid, MAX(workspace), MAX(gpus), AVG(cpu_percent),"
        " AVG(memory_bytes), AVG(gpu_memory_bytes), AVG(gpu_util) FROM telemetry_runs"
        f" WHERE {where} AND at <= ?{chosen}"
        f" GROUP BY run_uid, {group} ORDER BY run_uid, MIN(at)",
        (*args, now, *extra, *width),
    )
    found: dict[str, list[RunSample]] = {}
    for r in rows:
        gpus = tuple(json.loads(r[3])) if r[3] else ()
        found.setdefault(r[1], []).append(
            RunSample(
                at=r[0],
                run_uid=r[1],
                workspace=r[2],
                gpus=gpus,
                cpu_percent=r[4],
                memory_bytes=_int(r[5]),
                gpu_memory_bytes=_int(r[6]),
                gpu_util=r[7],
            )
        )
    return found


def run_summary(store: Store, run_uid: str) -> RunSummary | None:
    """The run's means and peaks over every sample kept of it (None: none kept)."""
    where, args = _source(store, "telemetry_runs", 0.0)
    means = ", ".join(
        f"TOTAL({f} * samples) / NULLIF(TOTAL(CASE WHEN {f} IS NOT NULL THEN samples END), 0)"
        for f in _RUN_FIELDS
    )
    peaks = ", ".join(f"MAX({p})" for p in _RUN_PEAKS)
    row = (
        store._connect()
        .execute(
            f"SELECT TOTAL(samples), MIN(at), MAX(at), {means}, {peaks} FROM telemetry_runs"
            f" WHERE run_uid = ? AND {where}",
            (run_uid, *args),
        )
        .fetchone()
    )
    if row is None or not row[0]:
        return None
    return RunSummary(
        samples=int(row[0]),
        first_at=row[1],
        last_at=row[2],
        mean=(row[3], row[4], row[5], row[6]),
        peak=(row[7], row[8], row[9], row[10]),
    )
