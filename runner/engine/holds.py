"""Runs kept out of the order: held (``astra hold``), before their begin time, or
waiting for their restart back-off to pass (runner/engine/backoff.py).

Such a run is kept out of the planner's view, as a run waiting for its dependencies
is: it is not in the order, is never the head and holds nothing back. It keeps its
submission time, so once released (or once its begin time has passed) it takes its
place in the order again as if it had never left.

A held run's reason names who holds it, ``Held by alice``; another workspace reads
``Held`` (runner/api/views.py, by the reason's code). A begin time is a calendar
time, so it is compared with the wall clock, not measured on the monotonic one: a
run to begin at 03:00 UTC begins when the wall clock says 03:00 UTC. A back-off is an
interval: measured on the monotonic clock. Its reason is the one its failure wrote
(``Restarting at 14:21:07 UTC (restart 3 of 10): …``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from runner.clock import Now
from runner.engine.backoff import resting_for
from runner.model import RunSpec, RunState
from runner.reasons import Reason, ReasonCode, held_reason
from runner.runspec.begin import shown_begin
from runner.store.db import RunRow


def begin_reason(begin_at: float) -> Reason:
    text = f"Waits until {shown_begin(begin_at)} (its begin time)"
    return Reason(text, code=ReasonCode.BEGIN_WAIT)


@dataclass(frozen=True)
class Kept:
    """The queued runs kept out of the order now, with why; and the next begin time."""

    reasons: dict[str, Reason]
    next_begin: float | None  # the earliest begin time still ahead: plan again then
    # runs that run on while a failed worker of theirs waits for its back-off (independent
    # workers): none of their workers is started until it has passed
    resting: frozenset[str] = frozenset()
    wake_in: float | None = None  # seconds until the first back-off ends: plan again then


def kept_out(runs: Iterable[RunRow], spec_of: Callable[[RunRow], RunSpec], now: Now) -> Kept:
    """Which queued runs are held, wait for their begin time or for a back-off."""
    reasons: dict[str, Reason] = {}
    made: dict[str | float, Reason] = {}  # one reason per holder and per begin time
    ahead: float | None = None
    resting: set[str] = set()
    wake: float | None = None
    for run in runs:
        if run.restart_at is not None and run.stop_request is None:
            left = resting_for(now, run.restart_at, run.restart_mono, run.restart_boot)
            if left > 0:
                wake = left if wake is None else min(wake, left)
                if run.state != RunState.QUEUED:
                    resting.add(run.name)
                elif run.held_by is None:
                    reasons[run.name] = run.reason or Reason("Restarting", code=ReasonCode.MESSAGE)
                    continue
        if run.state != RunState.QUEUED or run.stop_request is not None:
            continue
        if (user := run.held_by) is not None:
            reasons[run.name] = made.get(user) or made.setdefault(user, held_reason(user))
            continue
        begin = spec_of(run).begin_at
        if begin is not None and begin > now.wall:
            reasons[run.name] = made.get(begin) or made.setdefault(begin, begin_reason(begin))
            ahead = begin if ahead is None else min(ahead, begin)
    return Kept(reasons, ahead, frozenset(resting), wake)
