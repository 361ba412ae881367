"""Preemptions withdrawn: the preemptor no longer needs the room, so no SIGKILL.

A preemption stops a victim for one waiting run. If, while the victim's grace runs, that
run is deleted (or starts, or finishes) or no longer outranks the victim (either priority
changed), the stop is withdrawn: the victim's workers go back from Stopping to Running
in the same attempt, its reason clears and it is not counted as preempted. SIGTERM was
sent and cannot be taken back: a worker that ends before its grace would have ended
still counts as preempted and is queued again (runner/engine/loop.py, ``_record_end``).

A gang is withdrawn whole, or not at all: not once one of its workers has ended. Stops
for a delete or a time limit are never withdrawn.
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.engine.snapshot import SpecCache, unit_id
from runner.model import RunState, StopReason, WorkerState
from runner.planner.plan import WaitingRun
from runner.reasons import Reason, ReasonCode, RunRef
from runner.store.db import RunRow, Store, WorkerRow

GONE = "Preemption withdrawn: {0} no longer needs the room; the run keeps running"
OUTRANKED = (
    "Preemption withdrawn: {0} no longer has a higher priority than this run; the run keeps running"
)


@dataclass(frozen=True)
class Withdrawal:
    run: RunRow
    workers: tuple[WorkerRow, ...]
    why: Reason


def _why(preemptor: RunRef, waiting: dict[str, WaitingRun], victim: RunRow) -> Reason | None:
    wanted = waiting.get(preemptor.name)
    if wanted is None or wanted.workspace != preemptor.workspace:
        return Reason.of(GONE, preemptor, code=ReasonCode.MESSAGE)
    if wanted.priority <= victim.priority:
        return Reason.of(OUTRANKED, preemptor, code=ReasonCode.MESSAGE)
    return None


def _units(live: list[WorkerRow], specs: SpecCache) -> dict[str, list[WorkerRow]]:
    units: dict[str, list[WorkerRow]] = {}
    for w in live:
        units.setdefault(unit_id(w.run, w.worker, specs.gang(w.run)), []).append(w)
    return units


def withdrawals(
    live: list[WorkerRow], runs: dict[str, RunRow], waiting: dict[str, WaitingRun],
    specs: SpecCache,
) -> list[Withdrawal]:  # fmt: skip
    """The preempted units whose preemptor no longer waits for them, with the reason."""
    found = []
    for workers in _units(live, specs).values():
        first = workers[0]
        run = runs.get(first.run)
        preemptor = first.stopping_for
        if run is None or run.stop_request is not None or preemptor is None:
            continue
        preempted = all(
            w.state == WorkerState.STOPPING and w.stop_reason == StopReason.PREEMPT
            and not w.killed
            and w.stopping_for == preemptor for w in workers
        )  # fmt: skip
        whole = not specs.gang(run.name) or len(workers) == specs.get(run).workers
        why = _why(preemptor, waiting, run) if preempted and whole else None
        if why is not None:
            found.append(Withdrawal(run, tuple(workers), why))
    return found


def record_withdrawal(store: Store, w: Withdrawal, live: list[WorkerRow], now: float) -> None:
    """Stopping -> Running; the run too, once none of its workers is stopping."""
    ids = {x.id for x in w.workers}
    others = [
        x
        for x in live
        if x.run == w.run.name and x.state == WorkerState.STOPPING and x.id not in ids
    ]
    with store.transaction() as tx:
        for x in w.workers:  # the deadline stays: an exit within it is still the stop's
            store.workers.set_running(tx, x.id, stop_reason=StopReason.WITHDRAWN)
        if not others:
            store.runs.set_state(tx, w.run.name, RunState.RUNNING, None)
        store.events.add(
            tx, w.run.name, w.run.workspace, ReasonCode.PREEMPTION_WITHDRAWN, w.why, now
        )
