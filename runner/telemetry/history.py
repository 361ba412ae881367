"""The telemetry history: the sampler's samples written to the store in batches, and read
back (after a restart too).

The sampler hands each sample's rows to :meth:`Recorder.add`; every ``flush_seconds`` (by the
samples' own times) the samples waiting are written in one transaction, and every
MAINTAIN_SECONDS the closed 5-minute buckets are made coarse rows and old rows pruned
(runner/store/telemetry.py). A read is the store's rows and the samples still waiting,
never a write of its own.
A sample that cannot be written (a full disk) is dropped, never retried forever: the
waiting samples are bounded by MAX_PENDING.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import fields, replace
from typing import Any, TypeVar

from runner.store import telemetry as history
from runner.store.db import Store, StoreError
from runner.store.telemetry import GpuSample, RunSample, RunSummary

log = logging.getLogger("astraeus.telemetry")

FLUSH_SECONDS = 30.0  # samples waiting at most this long before one transaction writes them
MAINTAIN_SECONDS = 300.0  # between two downsamplings and prunings
MAX_PENDING = 10_000  # rows waiting at most (past it the oldest are dropped)


class Recorder:
    """Batches samples into the store; reads the history back."""

    def __init__(
        self,
        store: Store,
        *,
        flush_seconds: float = FLUSH_SECONDS,
        maintain_seconds: float = MAINTAIN_SECONDS,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.flush_seconds, self.maintain_seconds = flush_seconds, maintain_seconds
        self._wall = wall
        self._gpus: list[GpuSample] = []
        self._runs: list[RunSample] = []
        self._first: float | None = None  # the oldest waiting sample's time
        self._written_until = 0.0  # every sample before it is in the store
        self._maintained: float | None = None
        self._lock = threading.Lock()  # the waiting rows
        self._writing = threading.Lock()  # one flush at a time, in order
        self.last_write_ms = 0.0  # the last flush's transaction, for bench/ and the logs

    def add(self, at: float, gpus: Sequence[GpuSample], runs: Sequence[RunSample]) -> None:
        """Keep one sample (taken at ``at``); write what waits once it has waited
        ``flush_seconds``."""
        with self._lock:
            self._gpus.extend(gpus)
            self._runs.extend(runs)
            if self._first is None:
                self._first = at
            excess = len(self._gpus) + len(self._runs) - MAX_PENDING
            if excess > 0:
                del self._runs[: min(excess, len(self._runs))]
            due = at - self._first >= self.flush_seconds
        if due:
            self.flush()
        if self._maintained is None:
            self._maintained = at
        elif at - self._maintained >= self.maintain_seconds:
            self._maintained = at
            self.maintain()

    def flush(self) -> None:
        """Write every waiting sample, in one transaction."""
        with self._writing:
            with self._lock:
                gpus, runs = self._gpus, self._runs
                self._gpus, self._runs, self._first = [], [], None
            if not gpus and not runs:
                return
            began = time.perf_counter()
            try:
                history.write_samples(self.store, gpus, runs)
            except StoreError as error:  # a full disk: these samples are lost, not the loop
                log.warning("telemetry: %d samples not written: %s", len(gpus) + len(runs), error)
                return
            self.last_write_ms = (time.perf_counter() - began) * 1000
            newest = max([g.at for g in gpus] + [r.at for r in runs])
            self._written_until = max(self._written_until, newest)

    def maintain(self) -> None:
        """Downsample the closed buckets and prune, in one transaction."""
        with self._writing:
            until = self._written_until
        if until:
            try:
                history.maintain(self.store, self._wall(), until)
            except StoreError as error:
                log.warning("telemetry: history not pruned: %s", error)

    # ------------------------------------------------------------------ reads
    # The store's rows, and the samples still waiting (never a write: reads do not flush).

    def _waiting(self) -> tuple[list[GpuSample], list[RunSample]]:
        with self._lock:
            return list(self._gpus), list(self._runs)

    def gpu_series(
        self, since: float, points: int | None = history.MAX_POINTS
    ) -> dict[int, list[GpuSample]]:
        now = self._wall()
        with self._writing:  # no flush between the two reads: each sample seen once
            found = history.gpu_series(self.store, since, now, points)
            waiting = [g for g in self._waiting()[0] if since <= g.at <= now]
        return _merged(found, waiting, lambda g: g.gpu, history.span_key(since, now, points))

    def run_series(
        self, run_uids: Sequence[str] | None, since: float, points: int | None = history.MAX_POINTS
    ) -> dict[str, list[RunSample]]:
        now = self._wall()
        chosen = None if run_uids is None else set(run_uids)
        with self._writing:
            found = history.run_series(self.store, run_uids, since, now, points)
            waiting = [
                r for r in self._waiting()[1]
                if since <= r.at <= now and (chosen is None or r.run_uid in chosen)
            ]  # fmt: skip
        return _merged(found, waiting, lambda r: r.run_uid, history.span_key(since, now, points))

    def run_summary(self, run_uid: str) -> RunSummary | None:
        with self._writing:
            stored = history.run_summary(self.store, run_uid)
            waiting = [r for r in self._waiting()[1] if r.run_uid == run_uid]
        return _summed(stored, waiting)


K = TypeVar("K")
R = TypeVar("R", GpuSample, RunSample)


def _merged(
    found: dict[K, list[R]], waiting: list[R], key: Callable[[R], K],
    span: Callable[[float], float] | None,
) -> dict[K, list[R]]:  # fmt: skip
    """The store's series with the waiting samples after them, grouped as the store
    groups them (``span``: a sample's span, None: each its own): a span the store already
    has stays as the store has it, a newer one is the mean of its waiting samples."""
    groups: dict[tuple[K, float], list[R]] = {}
    for row in sorted(waiting, key=lambda r: r.at):
        series = found.get(key(row))
        at = row.at if span is None else span(row.at)
        if series and (row.at <= series[-1].at if span is None else at <= span(series[-1].at)):
            continue
        groups.setdefault((key(row), at), []).append(row)
    for (k, _), rows in groups.items():  # in time order within each series
        found.setdefault(k, []).append(rows[0] if len(rows) == 1 else _mean_row(rows))
    return found


_KEYS = frozenset({"at", "gpu", "run_uid", "workspace", "gpus"})
_WHOLE = frozenset({"memory_used", "memory_bytes", "gpu_memory_bytes"})


def _mean_row(rows: list[R]) -> R:
    """The rows' means, at the first one's time (as the store's read gives them)."""
    changes: dict[str, Any] = {}
    for f in fields(rows[0]):
        if f.name in _KEYS:
            continue
        known = [v for v in (getattr(r, f.name) for r in rows) if v is not None]
        mean = sum(known) / len(known) if known else None
        changes[f.name] = round(mean) if mean is not None and f.name in _WHOLE else mean
    return replace(rows[0], **changes)


def _mean(values: list[float | None]) -> tuple[float, int]:
    known = [v for v in values if v is not None]
    return sum(known), len(known)


def _summed(stored: RunSummary | None, waiting: list[RunSample]) -> RunSummary | None:
    """A run's summary over the store's samples and those still waiting."""
    if not waiting:
        return stored
    columns: list[list[float | None]] = [
        [r.cpu_percent for r in waiting],
        [None if r.memory_bytes is None else float(r.memory_bytes) for r in waiting],
        [None if r.gpu_memory_bytes is None else float(r.gpu_memory_bytes) for r in waiting],
        [r.gpu_util for r in waiting],
    ]  # fmt: skip
    count = len(waiting)
    means: list[float | None] = []
    peaks: list[float | None] = []
    for i, values in enumerate(columns):
        total, known = _mean(values)
        old_mean = None if stored is None else stored.mean[i]
        old_n = 0 if stored is None or old_mean is None else stored.samples
        if old_mean is not None:
            total, known = total + old_mean * old_n, known + old_n
        means.append(total / known if known else None)
        candidates = [v for v in values if v is not None]
        old_peak = None if stored is None else stored.peak[i]
        if old_peak is not None:
            candidates.append(old_peak)
        peaks.append(max(candidates) if candidates else None)
    first = min(r.at for r in waiting)
    last = max(r.at for r in waiting)
    if stored is not None:
        first, last, count = (
            min(first, stored.first_at),
            max(last, stored.last_at),
            count + stored.samples,
        )
    return RunSummary(count, first, last, (means[0], means[1], means[2], means[3]),
                      (peaks[0], peaks[1], peaks[2], peaks[3]))  # fmt: skip
