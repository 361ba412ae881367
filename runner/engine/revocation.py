"""Runs are authorised again when they start: a removed member's or workspace's runs wait.

A submit checks that its caller may use the workspace; the config may change before the
run starts (a member removed, a workspace removed; an ``astra admin`` change or a restart
with another config). Each plan asks again, for every queued run, whether its owner may
still run there, by the rules a submit uses (:func:`runner.service.runs.start_refusal`). A run
refused is kept out of the planner's view, as a run waiting for its dependencies is: it
is not in the order, is never the head and holds nothing back. It never starts. Its reason
says why, and it waits until the config allows it again or it is deleted, by an admin or
by its owner (a delete only takes away: it stays theirs to delete).

Runs that already run are not stopped here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from runner.model import RunState
from runner.reasons import Reason, ReasonCode
from runner.store.db import RunRow

# Never names the owner: the reason is shown to every caller (another workspace reads
# the run as "a job in another namespace", and its reason must not say whose it is).
NOT_A_MEMBER = (
    "Waits: its owner is no longer a member of namespace {workspace} "
    "(the owner or an admin may delete it)"
)
NO_WORKSPACE = (
    "Waits: namespace {workspace} is no longer in the config (its owner or an admin may delete it)"
)

Authorise = Callable[[str, str], str | None]  # (owner, workspace) -> why not; None: allowed


def revoked(runs: Iterable[RunRow], authorise: Authorise | None) -> dict[str, Reason]:
    """The queued runs whose owner may no longer run them, with why they wait."""
    if authorise is None:
        return {}
    asked: dict[tuple[str, str], str | None] = {}
    held: dict[str, Reason] = {}
    for run in runs:
        if run.state != RunState.QUEUED or run.stop_request is not None:
            continue
        key = (run.owner, run.workspace)
        if key not in asked:
            asked[key] = authorise(*key)
        refusal = asked[key]
        if refusal is not None:
            held[run.name] = Reason(refusal, code=ReasonCode.MESSAGE)
    return held


def held_back(runs: list[RunRow], held: dict[str, Reason]) -> list[RunRow]:
    """``runs`` without those held here."""
    return [r for r in runs if r.name not in held]
