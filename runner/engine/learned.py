"""Run lengths learned from this daemon's finished runs (runner/planner/lengths.py), fed
from the usage records the store keeps of every run that finished.

``refresh`` reads only the records written since the last call. A record counts when the
run's own work ended it (it succeeded, or failed: a crash, a time limit) and its length is
known; a run cancelled says nothing of how long it would have taken.

``Forecaster`` makes the start forecasts from them, corrected by how the forecasts made
here before compared with the starts that followed (runner/planner/lengths.py ``Errors``).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace

from runner.model import RunState
from runner.planner.estimates import Estimate, with_forecasts
from runner.planner.lengths import MIN_WAIT, ByHorizon, Lengths, RunKey, horizon
from runner.planner.plan import Snapshot
from runner.store.db import Store

LEARNED_FROM = (RunState.SUCCEEDED, RunState.FAILED)


class Learned:
    """The lengths of finished runs, by group."""

    def __init__(self, store: Store, lengths: Lengths | None = None) -> None:
        self.store = store
        self.lengths = lengths or Lengths()
        self._since = 0.0  # the newest record's finish seen
        self._seen: set[int] = set()  # the records at that finish already learned
        self._lock = threading.Lock()  # the estimates' helper and the API's previews

    def refresh_lengths(self) -> Lengths:
        """The lengths, with the records written since the last refresh learned."""
        self.refresh()
        return self.lengths

    def refresh(self) -> int:
        """Learn the records written since the last refresh; how many were new."""
        with self._lock:
            return self._refresh()

    def _refresh(self) -> int:
        found = self.store.usage_records(self._since)
        fresh = [r for r in found if r.id not in self._seen]
        for record in fresh:
            if record.outcome in LEARNED_FROM and record.run_seconds is not None:
                key = RunKey(record.workspace, record.owner, record.run)
                self.lengths.learn(key, record.run_seconds, record.time_limit_seconds)
        if found:
            self._since = found[-1].finished_at
            self._seen = {r.id for r in found if r.finished_at == self._since}
        return len(fresh)


class Forecaster:
    """Start forecasts from learned lengths (runner/planner/estimates.py ``with_forecasts``),
    corrected by their past errors: the first forecast each waiting run was shown is kept
    until it starts, and the wait it then had against the wait forecast calibrates the
    next. (Every forecast a run is shown while it waits, kept alike, calibrates worse: the
    runs that wait longest are learned from only once they start, late.) The 90 % start
    is said to the minute, rounded up."""

    def __init__(self, learned: Learned) -> None:
        self.learned = learned
        # the likely start's errors by horizon (each span has enough for a median); the
        # 90 % start's all together (a span alone has too few for its 90th percentile)
        self.likely, self.high = ByHorizon(), ByHorizon(spans=False)
        self._first: dict[str, tuple[float, float, float]] = {}  # run -> made, likely, by
        self._lock = threading.Lock()

    def estimates(
        self, snapshot: Snapshot, now: float, bounds: Mapping[str, Estimate],
        owner: Callable[[str], str], steps: int, *, record: bool = True,
    ) -> dict[str, Estimate]:  # fmt: skip
        """``bounds`` with their corrected forecasts. ``record``: the forecasts are shown
        (each waiting run's first is kept to learn from); a preview's are not."""
        made = with_forecasts(snapshot, now, bounds, self.learned.refresh_lengths(), owner, steps)
        with self._lock:
            if record:
                self._learn(snapshot, now, made)
            # the runs still waiting count for the 90 % start (or the longest waits would
            # count only once they start); for the likely one they made it worse (measured)
            waited = [(now - at, by - at) for at, _, by in self._first.values()]
            low = self.likely.factors(0.5, ())
            high = self.high.factors(0.9, [(f, w / f) for w, f in waited if f >= MIN_WAIT])
            return {name: self._corrected(e, now, low, high) for name, e in made.items()}

    def _learn(self, snapshot: Snapshot, now: float, made: Mapping[str, Estimate]) -> None:
        waiting = {w.name for w in snapshot.waiting}
        for name in [n for n in self._first if n not in waiting]:
            at, likely, by = self._first.pop(name)
            row = self.learned.store.get_run(name)
            if row is None or row.started_at is None or row.started_at < at:
                continue  # deleted, held or forgotten before it started: nothing to learn
            if row.submitted_at <= at:  # (not a later run of the same name)
                self.likely.observe(likely - at, row.started_at - at)
                self.high.observe(by - at, row.started_at - at)
        for name, e in made.items():
            if name not in self._first and e.likely is not None and e.likely_by is not None:
                self._first[name] = (now, e.likely, e.likely_by)

    @staticmethod
    def _corrected(
        e: Estimate, now: float, low: list[float | None], high: list[float | None]
    ) -> Estimate:
        """``e``'s forecasts scaled by the ratios' quantiles, by horizon (``low`` the
        likely start's, ``high`` the 90 % one's; None: as made)."""
        if e.likely is None or e.likely_by is None:
            return e
        by = _scaled(e.likely_by, now, high)
        by = float(math.ceil(by / 60) * 60)
        if e.starts_by is not None:
            by = min(by, e.starts_by)
        likely = min(_scaled(e.likely, now, low), by)
        return replace(e, likely=likely, likely_by=by)


def _scaled(at: float, now: float, factors: list[float | None]) -> float:
    """A start forecast ``at - now`` from now, scaled by its horizon's factor (a wait too
    short to scale, or no factor yet: as it is)."""
    wait = at - now
    factor = None if wait < MIN_WAIT else factors[horizon(wait)]
    return at if factor is None else now + wait * factor
