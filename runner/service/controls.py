"""Hold, release and requeue a run: who may, in which states, written before answering.

Who may: the members of the run's workspace and admins, as for a priority change.
- hold: a queued run leaves the order (runner/engine/holds.py) with the reason
  ``Held by <user>``; a run already held stays so. A run that has started (or has a
  stop asked) is not held: ``409 WRONG_STATE``, as Slurm's hold is for pending jobs.
- release: a held run goes back to its place in the order (its submission time was
  kept); a queued run not held is left as it is (``not held``, harmless as Slurm's
  release of a job not held); a run that has started or finished is refused with the
  same ``409 WRONG_STATE`` as hold (:func:`_not_waiting` is that rule for both).
- requeue: a running run is stopped with the grace and queued again, keeping its
  submission time and its restart count (a requeue is not a failure); a queued run is
  left as it is; a finished run, or one already stopping, is refused (``409``: submit
  a finished run again instead).

Each answers what happened, one word or two (``held``, ``already held``,
``released``, ``not held``, ``requeuing``, ``already queued``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from runner.model import RunState, StopReason
from runner.reasons import Reason, ReasonCode, held_reason
from runner.service.caller import WRONG_STATE, Caller, ServiceError
from runner.service.runs import Service
from runner.store.db import RunRow
from runner.store.tx import Tx

SLURM = "slurm"  # the executor name of the front for Slurm (runner/slurm/front.py)


def _run_to_change(service: Service, name: str, caller: Caller) -> RunRow:
    """The run ``caller`` may act on (404, 403 as a priority change answers)."""
    run = service.find_run(name)
    caller.check_acts_on(run.workspace, f"run {name}")
    return run


@contextmanager
def _changing(service: Service, name: str, caller: Caller) -> Iterator[tuple[Tx, RunRow]]:
    """The run ``caller`` may act on, read again within the transaction that changes it."""
    _run_to_change(service, name, caller)
    store = service.store
    with store.transaction() as tx:
        run = store.runs.get(name)
        if run is None:
            raise ServiceError(404, "NOT_FOUND", f"no run {name}")
        yield tx, run


def _not_waiting(run: RunRow) -> str | None:
    """Why ``run`` is not waiting in the queue (``has finished``, ``has started``), or
    None where it waits: what both hold and release refuse."""
    if run.state in RunState.FINISHED:
        return "has finished"
    if run.state != RunState.QUEUED or run.stop_request is not None:
        return "has started"
    return None


def _wrong_state(run: RunRow, what: str, only: str) -> ServiceError:
    return ServiceError(409, WRONG_STATE, f"run {run.name} is {run.state}: {only} (it {what})")


def hold(service: Service, name: str, caller: Caller) -> str:
    """Hold a queued run: out of the order until released."""
    store = service.store
    with _changing(service, name, caller) as (tx, run):
        if run.held_by is not None and run.state not in RunState.FINISHED:
            return "already held"
        what = _not_waiting(run)
        if what is None and store.workers.has_live(tx, name):
            what = "is with Slurm already"  # the front's pending job is its worker
        if what is not None:
            raise _wrong_state(run, what, "only a queued run can be held")
        store.runs.set_held(tx, name, caller.user, held_reason(caller.user))
        event = Reason(f"Held by {caller.user}", code=ReasonCode.HELD)
        store.events.add(tx, name, run.workspace, ReasonCode.HELD, event)
    service.poke()
    return "held"


def release(service: Service, name: str, caller: Caller) -> str:
    """Release a held run: back in the order, in its place."""
    store = service.store
    with _changing(service, name, caller) as (tx, run):
        what = _not_waiting(run)
        if what is not None and (run.held_by is None or run.state in RunState.FINISHED):
            raise _wrong_state(run, what, "only a held run can be released")
        if run.held_by is None:
            return "not held"
        waiting = Reason("Waiting for the scheduler", code=ReasonCode.WAITING)
        store.runs.set_held(tx, name, None, waiting if run.state == RunState.QUEUED else run.reason)
        event = Reason(f"Released by {caller.user}", code=ReasonCode.RELEASED)
        store.events.add(tx, name, run.workspace, ReasonCode.RELEASED, event)
    service.poke()
    return "released"


def requeue(service: Service, name: str, caller: Caller) -> str:
    """Stop a running run with the grace and queue it again (no restart spent)."""
    store = service.store
    with _changing(service, name, caller) as (tx, run):
        if service.executor == SLURM:  # the front does not stop and resubmit jobs itself
            raise ServiceError(
                409, WRONG_STATE, f"run {name} runs on Slurm, which this daemon does not "
                "requeue (delete it and submit it again)",
            )  # fmt: skip
        live = store.workers.has_live(tx, name)
        if run.state == RunState.QUEUED and not live and run.stop_request is None:
            return "already queued"
        if run.state in RunState.FINISHED:
            raise ServiceError(
                409, WRONG_STATE,
                f"run {name} is {run.state}: only a running run can be requeued"
                " (submit it again to run it once more)",
            )  # fmt: skip
        if run.stop_request is not None or run.state == RunState.STOPPING:
            raise ServiceError(409, WRONG_STATE, f"run {name} is already stopping")
        # the reason is read by every workspace: who asked is in the event, the workspace's
        reason = Reason("Requeued: stopping", code=ReasonCode.REQUEUING)
        store.runs.request_stop(tx, name, StopReason.REQUEUE, reason, stopping=True)
        event = Reason(f"Requeued by {caller.user}: stopping", code=ReasonCode.REQUEUING)
        store.events.add(tx, name, run.workspace, ReasonCode.REQUEUING, event)
    service.poke()
    return "requeuing"
