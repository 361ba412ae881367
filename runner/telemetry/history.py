"""The telemetry history: the sampler's samples written to the store in batches, and read
back (after a restart too).

The sampler hands each sample's rows to :meth:`Recorder.add`; every ``flush_seconds`` (by the
samples' own times) the samples waiting are written in one transaction, and every
MAINTAIN_SECONDS the closed 5-minute buckets are made coarse rows and old rows pruned
(runner/store/telemetry.py). A read flushes first, so that it sees every sample taken.
A sample that cannot be written (a full disk) is dropped, never retried forever: the
waiting samples are bounded by MAX_PENDING.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from runner.store import telemetry as history
from runner.store.db import Store, StoreError
from runner.store.telemetry import GpuRow, RunRow, RunSummary

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
        self._gpus: list[GpuRow] = []
        self._runs: list[RunRow] = []
        self._first: float | None = None  # the oldest waiting sample's time
        self._written_until = 0.0  # every sample before it is in the store
        self._maintained: float | None = None
        self._lock = threading.Lock()  # the waiting rows
        self._writing = threading.Lock()  # one flush at a time, in order
        self.last_write_ms = 0.0  # the last flush's transaction, for bench/ and the logs

    def add(self, at: float, gpus: Sequence[GpuRow], runs: Sequence[RunRow]) -> None:
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

    def gpu_series(
        self, since: float, points: int | None = history.MAX_POINTS
    ) -> dict[int, list[GpuRow]]:
        self.flush()
        return history.gpu_series(self.store, since, self._wall(), points)

    def run_series(
        self, run_uids: Sequence[str] | None, since: float, points: int | None = history.MAX_POINTS
    ) -> dict[str, list[RunRow]]:
        self.flush()
        return history.run_series(self.store, run_uids, since, self._wall(), points)

    def run_summary(self, run_uid: str) -> RunSummary | None:
        self.flush()
        return history.run_summary(self.store, run_uid)
