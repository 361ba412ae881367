"""What a run becomes when its workers end: queued again, restarted, or finished.

Worker rows go Starting -> Running -> (Stopping ->) Exited | Lost, observed by
the loop; here each ended row is classified once (Done, Failed, Cancelled;
a preempted attempt is Cancelled, its stop reason says ``preempt``) and the
run's state follows (docs/scheduling.md, "A run's life"):

- an exit during a stop, whatever its code, counts as the stop's, not as a
  finish; a preemption never spends the restart budget;
- a worker that exits non-zero or is lost restarts the run (a gang whole)
  while the budget lasts, then the run fails; each restart waits for its back-off
  (runner/engine/backoff.py), counted from the failure;
- a gang is queued again only once none of its workers is stopping;
- a requeue (``astra requeue``) stops every worker with the grace, then the run is
  queued again, its submission time and restart count as they were;
- a stop for idle GPUs (``idle_gpu_policy = "stop"``, runner/engine/idle.py) stops every
  worker with the grace, then the run fails, not queued again, no restart spent;
- a gang worker that never started (the daemon died between starting its siblings and
  it) restarts the gang whole, without spending the budget: a gang never runs partly.
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.clock import Now
from runner.engine.backoff import NO_BACKOFF, Backoff, Failure
from runner.engine.idle import idle_stopped
from runner.executors.cgroupfs import OUT_OF_MEMORY
from runner.model import RunSpec, RunState, StopReason, WorkerState
from runner.planner.plan import PREEMPTED_WAITING
from runner.reasons import Reason, ReasonCode, RunRef
from runner.store.db import RunRow, Store, WorkerRow, latest_workers
from runner.store.tx import Tx

STOPS_THAT_CANCEL = frozenset(
    {StopReason.DELETE, StopReason.TIMELIMIT, StopReason.FAILED, StopReason.RESTART,
     StopReason.NEVER_STARTED, StopReason.REQUEUE, StopReason.IDLE}
)  # fmt: skip


@dataclass
class _Batch:
    """The ended workers of one run, classified."""

    failures: list[WorkerRow]
    preempted_for: RunRef | None
    handles: list[str]


def _classify(store: Store, tx: Tx, ended: list[WorkerRow]) -> _Batch:
    batch = _Batch([], None, [])
    for w in ended:
        if w.stop_reason == StopReason.PREEMPT:  # the attempt is Cancelled, then queued again
            state = WorkerState.CANCELLED
            batch.preempted_for = batch.preempted_for or w.stopping_for
        elif w.stop_reason in STOPS_THAT_CANCEL:
            state = WorkerState.CANCELLED
        elif w.state == WorkerState.EXITED and w.exit_code == 0:
            state = WorkerState.DONE
        else:
            state = WorkerState.FAILED
            batch.failures.append(w)
        store.workers.settle(tx, w.id, state)
        if w.handle:
            batch.handles.append(w.handle)
    return batch


def _describe(w: WorkerRow) -> str:
    if w.error and (w.exit_code is None or w.error.startswith(OUT_OF_MEMORY)):
        return f"worker {w.worker} {w.error}"
    return f"worker {w.worker} exited with code {w.exit_code}"


def _on_failures(
    store: Store, tx: Tx, run: RunRow, spec: RunSpec, failures: list[WorkerRow],
    now: Now, backoff: Backoff,
) -> StopReason | None:  # fmt: skip
    """Spend the restart budget, counted for the back-off; returns the run's new stop
    request, if any."""
    if run.stop_request == StopReason.FAILED:  # it could not start: no restarts help
        return StopReason.FAILED
    first = failures[0]
    what = _describe(first)
    lived = now.elapsed(first.started_at, first.started_mono, first.boot_id)
    failure = Failure.of(backoff, lived, run.fails, run.quick)
    restarts = run.restarts + 1
    if restarts > spec.restart_limit:
        text = failure.failed(what, spec.restart_limit)
        failed = Reason(text, private=True, code=ReasonCode.MESSAGE)
        store.runs.request_stop(tx, run.name, StopReason.FAILED, failed, exit_code=first.exit_code)
        store.runs.back_off(tx, run.name, failure.fails, failure.quick, None)
        store.events.add(
            tx,
            run.name,
            run.workspace,
            ReasonCode.FAILED,
            Reason(text, code=ReasonCode.MESSAGE),
            now.wall,
        )
        return StopReason.FAILED
    reason = failure.restarting(what, restarts, spec.restart_limit, now.wall)
    gang = spec.gang and spec.workers > 1
    request = StopReason.RESTART if gang else run.stop_request
    store.runs.request_stop(tx, run.name, request, reason, restarts=restarts)
    until = None
    if failure.delay > 0:
        until = Now(now.wall + failure.delay, now.mono + failure.delay, now.boot)
    store.runs.back_off(tx, run.name, failure.fails, failure.quick, until)
    store.events.add(
        tx,
        run.name,
        run.workspace,
        ReasonCode.RESTARTING,
        Reason(reason.template, code=ReasonCode.MESSAGE),
        now.wall,
    )
    return request


def _restart_partial_gang(
    store: Store, tx: Tx, run: RunRow, ended: list[WorkerRow], now: float
) -> StopReason | None:
    missing = [w.worker for w in ended if w.stop_reason == StopReason.NEVER_STARTED]
    if not missing:
        return None
    text = (
        f"Restarting: worker {missing[0]} never started (the daemon stopped while starting it);"
        " the gang starts again whole, no restart spent"
    )
    said = Reason(text, code=ReasonCode.MESSAGE)
    store.runs.request_stop(tx, run.name, StopReason.RESTART, said)
    store.events.add(tx, run.name, run.workspace, ReasonCode.RESTARTING, said, now)
    return StopReason.RESTART


def _finish(
    store: Store, tx: Tx, run: RunRow, spec: RunSpec, request: StopReason | None,
    preempted_for: RunRef | None, latest: dict[int, WorkerRow], now: float,
    idle_after: float | None = None,
) -> None:  # fmt: skip
    """Nothing of the run lives any more: decide its state."""
    name, ws = run.name, run.workspace

    def ended(state: RunState, event: ReasonCode, reason: str, told: str) -> None:
        store.runs.finish(tx, name, state, now, Reason(reason, code=ReasonCode.MESSAGE))
        store.events.add(tx, name, ws, event, Reason(told, code=ReasonCode.MESSAGE), now)

    if request == StopReason.DELETE:
        ended(RunState.CANCELLED, ReasonCode.CANCELLED, "Deleted", "Deleted: stopped and cancelled")
    elif request == StopReason.TIMELIMIT:
        ended(
            RunState.FAILED, ReasonCode.FAILED, "Time limit reached", "Time limit reached: stopped"
        )
    elif request == StopReason.FAILED:
        store.runs.finish(tx, name, RunState.FAILED, now)
    elif request == StopReason.IDLE:  # idle_gpu_policy = "stop": not queued again
        store.runs.finish(tx, name, RunState.FAILED, now, idle_stopped(idle_after))
        store.events.add(tx, name, ws, ReasonCode.FAILED, idle_stopped(idle_after), now)  # FAILED
    elif request == StopReason.REQUEUE:  # its submission time and restarts as they were
        reason = Reason("Requeued: waiting to run again", code=ReasonCode.REQUEUED)
        store.runs.requeue(tx, name, clear_request=True, reason=reason)
        store.events.add(
            tx,
            name,
            ws,
            ReasonCode.REQUEUED,
            Reason("Requeued: stopped, queued again", code=ReasonCode.MESSAGE),
            now,
        )
    elif len(latest) == spec.workers and all(w.state == WorkerState.DONE for w in latest.values()):
        store.runs.finish(tx, name, RunState.SUCCEEDED, now, None, exit_code=0)
        store.events.add(
            tx, name, ws, ReasonCode.SUCCEEDED, Reason("Succeeded", code=ReasonCode.MESSAGE), now
        )
    elif preempted_for is not None:
        _requeue_preempted(store, tx, run, preempted_for, now)
        store.runs.requeue(tx, name)
    else:
        store.runs.requeue(tx, name, clear_request=True)


def _requeue_preempted(store: Store, tx: Tx, run: RunRow, head: RunRef, now: float) -> None:
    reason = Reason.of(PREEMPTED_WAITING, head, code=ReasonCode.MESSAGE)
    store.runs.note_preempted(tx, run.name, head, run.preemptions + 1, reason)
    message = Reason.of("Preempted by {0}; queued again", head, code=ReasonCode.MESSAGE)
    store.events.add(tx, run.name, run.workspace, ReasonCode.REQUEUED, message, now)


def settle_run(
    store: Store, run: RunRow, spec: RunSpec, workers: list[WorkerRow], at: Now,
    idle_after: float | None = None, backoff: Backoff = NO_BACKOFF,
) -> list[str] | None:  # fmt: skip
    """Classify the run's ended workers and move the run on. ``idle_after``: the
    ``[machine] idle_gpu_after`` a run stopped for idle GPUs is told of; ``backoff``:
    the wait before a restart.

    Returns the handles to clean up, or None when nothing changed.
    """
    ended = [w for w in workers if w.state in (WorkerState.EXITED, WorkerState.LOST)]
    live = [w for w in workers if w.state in WorkerState.LIVE]
    if not ended and (live or run.stop_request is None):
        return None
    now = at.wall
    with store.transaction() as tx:
        batch = _classify(store, tx, ended)
        request = run.stop_request
        if batch.failures:
            request = _on_failures(store, tx, run, spec, batch.failures, at, backoff)
        elif request is None and live and spec.gang and spec.workers > 1:
            request = _restart_partial_gang(store, tx, run, ended, now)
        latest = latest_workers(store.workers.of(run.name)) if ended else latest_workers(workers)
        if not live:
            _finish(store, tx, run, spec, request, batch.preempted_for, latest, now, idle_after)
        elif batch.preempted_for is not None and not (spec.gang and spec.workers > 1):
            _requeue_preempted(store, tx, run, batch.preempted_for, now)
            stopping = all(w.state == WorkerState.STOPPING for w in live)
            state = RunState.STOPPING if stopping else RunState.RUNNING
            store.runs.set_state(tx, run.name, state)
    return batch.handles
