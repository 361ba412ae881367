"""How long the plans took: every plan's time counted in buckets, for ``GET /metrics``.

The back end's tick observes each plan (``LoopStatus.plan_times``); the metrics read a
consistent copy at scrape time (runner/api/metrics.py). Kept in memory: a restart starts
them again from zero, as Prometheus expects of a histogram.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

__all__ = ["PLAN_BUCKETS_MS", "PlanTimes", "PlanTimesRead"]

# upper bounds, in milliseconds: a small queue plans in well under a millisecond, 100,000 runs
# in hundreds
PLAN_BUCKETS_MS = (0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0)


@dataclass(frozen=True, slots=True)
class PlanTimesRead:
    """A copy: ``cumulative[i]`` plans took at most ``buckets_ms[i]``."""

    cumulative: tuple[int, ...]
    count: int
    total_ms: float
    buckets_ms: tuple[float, ...] = PLAN_BUCKETS_MS


@dataclass
class PlanTimes:
    _counts: list[int] = field(default_factory=lambda: [0] * (len(PLAN_BUCKETS_MS) + 1))
    _total_ms: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def observe(self, ms: float) -> None:
        index = next((i for i, b in enumerate(PLAN_BUCKETS_MS) if ms <= b), len(PLAN_BUCKETS_MS))
        with self._lock:
            self._counts[index] += 1
            self._total_ms += ms

    def read(self) -> PlanTimesRead:
        with self._lock:
            counts, total = list(self._counts), self._total_ms
        cumulative, running = [], 0
        for c in counts[:-1]:
            running += c
            cumulative.append(running)
        return PlanTimesRead(tuple(cumulative), sum(counts), total)
