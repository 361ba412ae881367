"""How long a run will take, learned from how long similar runs really took.

Each finished run's length (the time its workers ran, over its attempts) goes into a small
histogram (``Sketch``: counts in buckets growing 25 % each, 1 s to 60 days, each with
the shortest and longest length it holds; a quantile is good to half a bucket, about
12 %, and exact where a bucket holds one length) for each group it belongs to, from the
most specific to the machine as a whole:

1. its workspace, owner and name stem (``train-lr0.1`` and ``train-lr0.3`` are both
   ``train-lr*``: a sweep's or a schedule's runs);
2. its workspace, owner and command;
3. its workspace;
4. the machine.

A run with a time limit is forecast from how much of their limits similar runs used (a
sketch of ``length / limit`` beside the lengths, for the runs that had a limit), times its
own limit; one without, from the lengths. A forecast comes from the most specific group
with at least ``MIN_RUNS`` runs (the likely length its median, the 90 % length its 90th
percentile widened by the sketch's error, half a bucket), is capped by the run's time
limit, and, for a running run, is conditioned on how long it has already run (the
quantiles of the lengths longer than that). Groups are bounded per workspace (the least
recently fed are forgotten first). A forecast says how many runs it rests on and at which
level, never which runs: the planner sees numbers only.

Pure like the planner: lengths in, forecasts out; the engine feeds it.
"""

from __future__ import annotations

import bisect
import math
import re
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass

GROWTH = 1.25  # each bucket 25 % longer than the one before
FIRST = 1.0  # seconds: the first bucket's upper edge
BUCKETS = 1 + math.ceil(math.log(60 * 86400 / FIRST, GROWTH))  # up to 60 days
MIN_RUNS = 5  # runs a group needs before its forecast is used
GROUPS_PER_WORKSPACE = 256
LEVELS = ("name", "command", "workspace", "machine")
WIDER = math.sqrt(GROWTH)  # the 90 % length, widened by a sketch's error (half a bucket)
RATIO = 1e6  # a share of the time limit is sketched as this many "seconds" per limit
_DIGITS = re.compile(r"\d+(?:[._]\d+)*")


def stem(name: str) -> str:
    """The name with its numbers as ``*``: a sweep's or a schedule's runs share it."""
    return _DIGITS.sub("*", name)


def _bucket(seconds: float) -> int:
    if seconds <= FIRST:
        return 0
    return min(BUCKETS - 1, math.ceil(math.log(seconds / FIRST, GROWTH)))


class Sketch:
    """Counts of lengths by bucket, with the shortest and longest each bucket holds;
    quantiles by interpolating between those two. Where every length of a bucket is the
    same (runs that all used their whole limit) the quantile is that length, not a point
    inside the bucket."""

    __slots__ = ("counts", "highs", "lows", "total")

    def __init__(self) -> None:
        self.counts = [0] * BUCKETS
        self.total = 0
        self.lows = [math.inf] * BUCKETS
        self.highs = [0.0] * BUCKETS

    def add(self, seconds: float) -> None:
        seconds = max(0.0, seconds)
        b = _bucket(seconds)
        self.counts[b] += 1
        self.total += 1
        self.lows[b] = min(self.lows[b], seconds)
        self.highs[b] = max(self.highs[b], seconds)

    def below(self, seconds: float) -> float:
        """How many lengths are at most ``seconds`` (interpolated within its bucket)."""
        b = _bucket(seconds)
        low, high = self.lows[b], self.highs[b]
        if seconds >= high:
            part = 1.0
        elif seconds < low:
            part = 0.0
        else:
            part = (seconds - low) / (high - low)
        return sum(self.counts[:b]) + part * self.counts[b]

    def quantile(self, q: float, after: float = 0.0) -> float:
        """The ``q`` quantile of the lengths longer than ``after`` (all when 0)."""
        done = self.below(after) if after > 0 else 0.0
        left = self.total - done
        if left <= 0:  # longer than all seen: it ends no sooner than now
            return after
        target, seen = done + q * left, 0.0
        for b, n in enumerate(self.counts):
            if n and seen + n >= target:
                low, high = self.lows[b], self.highs[b]
                value = low + (target - seen) / n * (high - low)
                return max(value, after)
            seen += n
        return max(max(self.highs), after)  # (rounding past the last): the longest


@dataclass(frozen=True, slots=True)
class RunKey:
    """What groups a run with similar ones."""

    workspace: str
    owner: str
    name: str
    command: str = ""

    def groups(self) -> tuple[tuple[str, ...], ...]:
        """Its groups, the most specific first (one per level of LEVELS)."""
        ws, owner = self.workspace, self.owner
        return (("name", ws, owner, stem(self.name)), ("command", ws, owner, self.command),
                ("workspace", ws), ("machine",))  # fmt: skip


@dataclass(frozen=True, slots=True)
class Forecast:
    """``likely`` (the median) and ``by`` (the 90th percentile) in seconds from the run's
    start; ``runs``: how many finished runs it rests on; ``level``: which group."""

    likely: float
    by: float
    runs: int
    level: str


class Lengths:
    """Sketches by group, bounded per workspace."""

    def __init__(self, min_runs: int = MIN_RUNS, per_workspace: int = GROUPS_PER_WORKSPACE):
        self.min_runs = min_runs
        self.per_workspace = per_workspace
        self.sketches: OrderedDict[tuple[str, ...], Sketch] = OrderedDict()
        self._count: dict[str, int] = {}  # groups kept per workspace

    @property
    def runs(self) -> int:
        """How many finished runs were learned (the machine's group holds them all)."""
        sketch = self.sketches.get(("machine",))
        return 0 if sketch is None else sketch.total

    def learn(self, key: RunKey, seconds: float, limit: float | None = None) -> None:
        """A finished run of ``key`` ran ``seconds`` (of a time limit of ``limit``)."""
        groups = key.groups()
        if limit:
            share = min(1.0, seconds / limit) * RATIO
            groups += tuple(("share", *g) for g in groups)
        for group in groups:
            sketch = self.sketches.get(group)
            if sketch is None:
                sketch = self.sketches[group] = Sketch()
                self._kept(group, +1)
            self.sketches.move_to_end(group)
            sketch.add(share if group[0] == "share" else seconds)

    def _kept(self, group: tuple[str, ...], change: int) -> None:
        level = group[1:] if group[0] == "share" else group
        if len(level) < 3:  # the workspace's own group and the machine's are always kept
            return
        ws = level[1]
        self._count[ws] = self._count.get(ws, 0) + change
        while change > 0 and self._count[ws] > self.per_workspace:
            oldest = next(g for g in self.sketches if _workspace_of(g) == ws)
            del self.sketches[oldest]
            self._count[ws] -= 1

    def forecast(
        self, key: RunKey, elapsed: float = 0.0, limit: float | None = None
    ) -> Forecast | None:
        """How long ``key``'s run takes in all (None: no group has enough history);
        ``elapsed``: how long it has run already; capped by its time limit."""
        if limit:
            for group in key.groups():
                sketch = self.sketches.get(("share", *group))
                if sketch is None or sketch.total < self.min_runs:
                    continue
                used = min(elapsed / limit, 1.0) * RATIO
                likely, by = sketch.quantile(0.5, used), sketch.quantile(0.9, used) * WIDER
                return Forecast(min(likely / RATIO, 1.0) * limit, min(by / RATIO, 1.0) * limit,
                                sketch.total, group[0])  # fmt: skip
        for group in key.groups():
            sketch = self.sketches.get(group)
            if sketch is None or sketch.total < self.min_runs:
                continue
            likely, by = sketch.quantile(0.5, elapsed), sketch.quantile(0.9, elapsed) * WIDER
            if limit is not None:
                likely, by = min(likely, limit), min(by, limit)
            return Forecast(likely, by, sketch.total, group[0])
        return None


def _workspace_of(group: tuple[str, ...]) -> str | None:
    """The workspace of a group that may be forgotten (by name or command), else None."""
    level = group[1:] if group[0] == "share" else group
    return level[1] if len(level) >= 3 else None


MIN_WAIT = 60.0  # seconds: a forecast wait shorter than this says "now", not a scale
ERRORS_KEPT = 2000  # the latest forecasts' errors a correction rests on
MIN_ERRORS = 20  # before this many, forecasts stand as made
# forecast waits told apart: a forecast of an hour errs unlike one of a week
HORIZONS = (3600.0, 6 * 3600.0, 86400.0, 3 * 86400.0)


class Errors:
    """How the waits runs really had compare with the waits forecast for them: the ratio
    of one to the other, for the latest ERRORS_KEPT runs that started. A forecast is
    then corrected by the ratio's quantile (the 90 % start by the 90th percentile of its
    ratios, the likely one by the median): calibrated by what happened here, as a queue's
    past delays calibrate a bound on the next (QBETS).

    The runs still waiting are in it too, or the ones that wait longest would count only
    once they start, late: each is a ratio known to be at least what it has waited so far
    over its forecast wait (``censored``), and the quantile is the Kaplan–Meier one."""

    def __init__(self, kept: int = ERRORS_KEPT, min_seen: int = MIN_ERRORS) -> None:
        self.ratios: deque[float] = deque(maxlen=kept)
        self.min_seen = min_seen

    def observe(self, forecast_wait: float, wait: float) -> None:
        if forecast_wait < MIN_WAIT:
            return
        self.ratios.append(max(0.0, wait) / forecast_wait)

    def factor(self, q: float, censored: Sequence[float] = ()) -> float | None:
        """The ``q`` quantile of the ratios, with ``censored`` ratios known only to be at
        least so large (None: fewer than ``min_seen`` seen)."""
        if len(self.ratios) < self.min_seen:
            return None
        # (ratio, 1 for one seen, 0 for a lower bound): at one ratio, the seen go first
        events = sorted([(r, 1) for r in self.ratios] + [(c, 0) for c in censored],
                        key=lambda e: (e[0], -e[1]))  # fmt: skip
        left, at_risk, i = 1.0, len(events), 0
        while i < len(events):
            ratio, seen, j = events[i][0], 0, i
            while j < len(events) and events[j][0] == ratio:
                seen += events[j][1]
                j += 1
            if seen:
                left *= 1 - seen / at_risk
                if 1 - left >= q:
                    return ratio
            at_risk -= j - i
            i = j
        return events[-1][0]  # beyond what was seen: the largest known

    def scaled(self, q: float, forecast_wait: float, censored: Sequence[float] = ()) -> float:
        """``forecast_wait`` corrected by the ``q`` quantile of the ratios."""
        found = self.factor(q, censored)
        if found is None or forecast_wait < MIN_WAIT:
            return forecast_wait
        return forecast_wait * found


def horizon(wait: float) -> int:
    """Which of HORIZONS' spans a forecast wait of ``wait`` seconds falls in."""
    return bisect.bisect(HORIZONS, wait)


class ByHorizon:
    """Errors by how far ahead the forecast looked; a span with too few of its own is
    corrected by all of them together."""

    def __init__(
        self, kept: int = ERRORS_KEPT, min_seen: int = MIN_ERRORS, *, spans: bool = True
    ) -> None:
        """``spans`` False: all horizons corrected together."""
        self.all = Errors(kept, min_seen)
        self.each = [Errors(kept, min_seen) for _ in range(len(HORIZONS) + 1)] if spans else []

    def observe(self, forecast_wait: float, wait: float) -> None:
        if forecast_wait < MIN_WAIT:
            return
        self.all.observe(forecast_wait, wait)
        if self.each:
            self.each[horizon(forecast_wait)].observe(forecast_wait, wait)

    def factors(self, q: float, censored: Sequence[tuple[float, float]]) -> list[float | None]:
        """The ``q`` quantile of each span's ratios (``Errors.factor``); ``censored``: the
        runs still waiting, as (forecast wait, the least their ratio can be)."""
        overall = self.all.factor(q, [r for _, r in censored])
        if not self.each:
            return [overall] * (len(HORIZONS) + 1)
        out = []
        for span, errors in enumerate(self.each):
            own = errors.factor(q, [r for f, r in censored if horizon(f) == span])
            out.append(overall if own is None else own)
        return out
