"""Run lengths learned from this daemon's finished runs (runner/planner/lengths.py), fed
from the usage records the store keeps of every run that finished.

``refresh`` reads only the records written since the last call. A record counts when the
run's own work ended it (it succeeded, or failed: a crash, a time limit) and its length is
known; a run cancelled says nothing of how long it would have taken.

``Forecaster`` makes the start forecasts from them, corrected by how the forecasts made
here before compared with the starts that followed (runner/planner/lengths.py ``Errors``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import replace

from runner.durations import minute
from runner.model import RunState
from runner.planner.arrivals import Arrivals
from runner.planner.estimates import Estimate, with_forecasts
from runner.planner.lengths import MIN_WAIT, ByHorizon, Errors, Lengths, RunKey, horizon
from runner.planner.plan import Snapshot
from runner.store.db import Store

LEARNED_FROM = (RunState.SUCCEEDED, RunState.FAILED)


class Learned:
    """The lengths of finished runs, by group."""

    def __init__(self, store: Store, lengths: Lengths | None = None) -> None:
        self.store = store
        self.lengths = lengths or Lengths()
        self.arrivals = Arrivals()  # the work of each priority submitted lately
        # the learned likely lengths of the runs last counted as arrivals, and how many
        # runs the lengths had learned then: read again only once they learned more
        self._took: dict[tuple[str, str], float | None] = {}
        self._took_at = -1
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
        found = self.store.usage.records(self._since)
        fresh = [r for r in found if r.id not in self._seen]
        for record in fresh:
            self.arrivals.finished(record.submitted_at, record.priority, record.gpu_seconds)
            if record.outcome in LEARNED_FROM and record.run_seconds is not None:
                key = RunKey(record.workspace, record.owner, record.run)
                self.lengths.learn(key, record.run_seconds, record.time_limit_seconds)
        if found:
            self._since = found[-1].finished_at
            self._seen = {r.id for r in found if r.finished_at == self._since}
        return len(fresh)

    def stretches(
        self, snapshot: Snapshot, now: float, owner: Callable[[str], str]
    ) -> dict[int, float]:
        """By how much each waiting priority's forecast waits stretch for the work of
        higher priority arriving meanwhile (runner/planner/arrivals.py); a run without a
        time limit counts its learned likely length."""

        took: dict[tuple[str, str], float | None] = {}

        def length(workspace: str, run: str, limit: float | None) -> float | None:
            if limit:
                return limit
            key = (workspace, run)
            if key not in known:
                forecast = self.lengths.forecast(RunKey(workspace, owner(run), run))
                known[key] = None if forecast is None else forecast.likely
            took[key] = known[key]
            return took[key]

        with self._lock:
            self._refresh()
            known = self._took if self._took_at == self.lengths.runs else {}
            stretch = self.arrivals.stretches(snapshot, now, length)
            self._took, self._took_at = took, self.lengths.runs  # only the runs of now
            return stretch


# a forecast made in its run's first hour in the queue, and one made later, are learned
# from apart: most runs start within the hour, and their errors say little of the runs
# still waiting after it, whose forecasts are most of those shown (measured: README,
# "Start forecasts")
FRESH = 3600.0
# (priority below, at or above 0; made fresh or later) (``_class``)
CLASSES = tuple((p, late) for p in (-1, 0, 1) for late in (False, True))
Class = tuple[int, bool]


def _class(priority: int, waited: float) -> Class:
    """The class of a forecast for a run of ``priority`` that has waited ``waited``
    seconds since it was submitted: later arrivals pass low-priority runs, not high ones,
    and the runs still waiting after an hour are not like those that start within it."""
    return (priority > 0) - (priority < 0), waited >= FRESH


class Forecaster:
    """Start forecasts from learned lengths (runner/planner/estimates.py ``with_forecasts``),
    corrected by their past errors: the first forecast each waiting run was shown, and
    the first once it has waited an hour, are kept until it starts, and the wait it then
    had against the wait forecast calibrates the next. (Every forecast a run is shown
    while it waits, kept alike, calibrates worse: the runs that wait longest are learned
    from only once they start, late.) The 90 % start is corrected by the errors of
    forecasts of its class (``_class``: its priority, and whether it has waited an hour;
    all forecasts' until its class has enough) and said to the minute, rounded up; the
    likely one, where work without a time limit is in its way (no bound), by the errors
    of forecasts that looked as far ahead. Where every run in the way has a limit, the
    lengths are shares of those limits and the likely start stands as replayed:
    corrected, it was further off (measured: README, "Start forecasts")."""

    def __init__(self, learned: Learned) -> None:
        self.learned = learned
        # the likely start's errors by horizon (each span has enough for a median); the
        # 90 % start's by priority class, and all together
        self.likely = ByHorizon()
        self.high = Errors()
        self.high_of = {c: Errors() for c in CLASSES}
        # (run, made after its first hour) -> the first forecast of that class: made at,
        # likely start, 90 % start, class
        self._first: dict[tuple[str, bool], tuple[float, float, float, Class]] = {}
        # run -> the likely and 90 % starts first shown for it (corrected), till it starts
        self._shown: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def estimates(
        self, snapshot: Snapshot, now: float, bounds: Mapping[str, Estimate],
        owner: Callable[[str], str], steps: int, *, record: bool = True,
    ) -> dict[str, Estimate]:  # fmt: skip
        """``bounds`` with their corrected forecasts. ``record``: the forecasts are shown
        (each waiting run's first is kept to learn from); a preview's are not."""
        # (what the runs requeued and resumed have done already: asked once a forecast is made)
        made = with_forecasts(snapshot, now, bounds, self.learned.refresh_lengths(), owner, steps,
                              self.learned.store.workers.ran_before)  # fmt: skip
        forecast = any(e.likely_by is not None for e in made.values())
        stretch = self.learned.stretches(snapshot, now, owner) if forecast else {}
        for w in snapshot.waiting:
            if (e := made.get(w.name)) is not None and e.likely_by is not None:
                made[w.name] = replace(e, likely_by=now + (e.likely_by - now) * stretch[w.priority])
        classes = {w.name: _class(w.priority, now - w.submitted_at) for w in snapshot.waiting}
        with self._lock:
            if record:
                self._learn(now, made, classes)
            low = self.likely.factors(0.5, ())
            # the runs still waiting count for the 90 % start (or the longest waits would
            # count only once they start); for the likely one they made it worse (measured)
            late: dict[Class, list[float]] = {c: [] for c in CLASSES}
            for at, _, by, c in self._first.values():
                if by - at >= MIN_WAIT:
                    late[c].append((now - at) / (by - at))
            overall = self.high.factor(0.9, [r for c in CLASSES for r in late[c]])
            high = {c: self.high_of[c].factor(0.9, late[c]) for c in CLASSES}
            high = {c: overall if f is None else f for c, f in high.items()}
            out = {
                name: self._corrected(e, now, low, high[classes.get(name, (0, False))])
                for name, e in made.items()
            }
            if record:
                for name, e in out.items():
                    if e.likely is not None and e.likely_by is not None:
                        self._shown.setdefault(name, (e.likely, e.likely_by))
            return out

    def first_shown(self, name: str) -> tuple[float, float] | None:
        """The likely and 90 % starts first forecast for ``name`` while it waits (None:
        none was shown), as its start event says them."""
        with self._lock:
            return self._shown.get(name)

    def _learn(
        self, now: float, made: Mapping[str, Estimate], classes: Mapping[str, Class]
    ) -> None:
        for name in [n for n in self._shown if n not in classes]:
            del self._shown[name]
        for key in [k for k in self._first if k[0] not in classes]:
            name = key[0]
            at, likely, by, c = self._first.pop(key)
            row = self.learned.store.runs.get(name)
            if row is None or row.started_at is None or row.started_at < at:
                continue  # deleted, held or forgotten before it started: nothing to learn
            if row.submitted_at <= at:  # (not a later run of the same name)
                self.likely.observe(likely - at, row.started_at - at)
                self.high.observe(by - at, row.started_at - at)
                self.high_of[c].observe(by - at, row.started_at - at)
        for name, e in made.items():
            c = classes.get(name, (0, False))
            if (name, c[1]) not in self._first and e.likely is not None and e.likely_by is not None:
                self._first[name, c[1]] = (now, e.likely, e.likely_by, c)

    @staticmethod
    def _corrected(
        e: Estimate, now: float, low: list[float | None], high: float | None
    ) -> Estimate:
        """``e``'s forecasts scaled by the ratios' quantiles (``low`` the likely start's, by
        horizon; ``high`` the 90 % one's; None: as made)."""
        if e.likely is None or e.likely_by is None:
            return e
        by = minute(_scaled(e.likely_by, now, lambda _: high))
        if e.promise and e.starts_by is not None:  # the head's: no forecast breaks it
            by = min(by, e.starts_by)
        likely = e.likely
        if e.starts_by is None:  # work of unknown length in the way: its guess corrected
            likely = _scaled(e.likely, now, lambda wait: low[horizon(wait)])
        return replace(e, likely=min(likely, by), likely_by=by)


def _scaled(at: float, now: float, factor: Callable[[float], float | None]) -> float:
    """A start forecast ``at - now`` from now, scaled by ``factor`` of that wait (a wait
    too short to scale, or no factor yet: as it is)."""
    wait = at - now
    found = None if wait < MIN_WAIT else factor(wait)
    return at if found is None else now + wait * found
