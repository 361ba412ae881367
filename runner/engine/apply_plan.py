"""The plan applied: its reasons and preemptions written, then the stops sent.

The last phase of the loop's tick (runner/engine/loop.py); the starts are in starts.py.
Each decision is written before it is acted on: a preempted run's state and events
commit before ``stop`` writes its workers Stopping and sends SIGTERM.
"""

from __future__ import annotations

from collections.abc import Callable

from runner.engine.dependencies import Dependencies
from runner.engine.snapshot import SpecCache, unit_id
from runner.model import RunState, StopReason, WorkerState
from runner.planner.plan import Plan
from runner.reasons import Reason, ReasonCode, RunRef
from runner.store.db import RunRow, Store, WorkerRow

_PREEMPTED = ReasonCode.PREEMPTED

# Loop.stop_workers: (run, workers, why, for_run, now)
StopWorkers = Callable[[str, list[WorkerRow], StopReason, RunRef | None, float], None]


def settle_dependencies(store: Store, deps: Dependencies, runs: list[RunRow], now: float) -> None:
    """Runs whose dependency failed (or went away) can never start: they fail. Runs
    whose dependencies all succeeded are marked, not to be held back again."""
    by_name = {r.name: r for r in runs}
    with store.transaction() as tx:
        for name in deps.met:
            store.runs.mark_deps_met(tx, name)
        for name, reason in deps.failing.items():
            store.runs.finish(tx, name, RunState.FAILED, now, reason)
            store.events.add(tx, name, by_name[name].workspace, ReasonCode.FAILED, reason, now)


def apply_reasons(
    store: Store, result: Plan, runs: list[RunRow], now: float, waiting: dict[str, Reason]
) -> None:
    """Write each waiting run's reason where it changed, and a quota's first event."""
    by_name = {r.name: r for r in runs}
    current = {**waiting, **result.reasons}
    changes = {
        name: reason
        for name, reason in current.items()
        if by_name[name].reason != reason  # the row, read now: others write reasons too
    }
    quota_first = [n for n in result.quota_waits if not by_name[n].quota_noted]
    if not changes and not quota_first:
        return
    with store.transaction() as tx:
        for name, reason in changes.items():
            store.runs.set_reason(tx, name, reason)
        for name in quota_first:  # from the check itself: its reason may name a preemptor
            reached = result.quota_reached[name]
            run = by_name[name]
            store.events.add(tx, name, run.workspace, ReasonCode.QUOTA_REACHED, reached, now)
            store.runs.note_quota(tx, name)


def apply_preemptions(
    store: Store, specs: SpecCache, grace: float, result: Plan, live: list[WorkerRow],
    now: float, stop: StopWorkers,
) -> None:  # fmt: skip
    """Write each preemption (the run's state, its events), then stop its unit's workers."""
    preemptors = list(dict.fromkeys(p.for_run for p in result.preemptions))
    for head in preemptors:  # the head, and runs preempting their own workspace's work
        with store.transaction() as tx:
            message = result.reasons[head.name]
            store.events.add(tx, head.name, head.workspace, ReasonCode.PREEMPTING, message, now)
    stopped: set[int] = set()  # workers stopped by this plan so far (``live`` is older)
    for p in result.preemptions:
        head = p.for_run
        gang = specs.gang(p.run)
        unit = [w for w in live if unit_id(w.run, w.worker, gang) == p.unit_id]
        stopped.update(w.id for w in unit)
        mine = [w for w in live if w.run == p.run]
        others = [w for w in mine if w.state != WorkerState.STOPPING and w.id not in stopped]
        with store.transaction() as tx:
            reason = Reason.of("Preempted by higher-priority work ({0})", head, code=_PREEMPTED)
            if others:  # independent workers: the rest keep running
                n = len(mine)
                reason = Reason.of(
                    f"{n - len(others)} of {n} workers stopping (preempted by {{0}})", head,
                    code=_PREEMPTED,
                )  # fmt: skip
            state = RunState.RUNNING if others else RunState.STOPPING
            store.runs.set_state(tx, p.run, state, reason)
            text = Reason.of(
                f"Preempted by higher-priority work ({{0}}): SIGTERM sent, "
                f"SIGKILL after {grace:g} s",
                head,
                code=ReasonCode.MESSAGE,
            )
            store.events.add(tx, p.run, p.workspace, ReasonCode.PREEMPTED, text, now)
        stop(p.run, unit, StopReason.PREEMPT, head, now)
