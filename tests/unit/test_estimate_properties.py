"""Invariants of the start estimates (runner/planner/estimates.py) over the planner's
random snapshots (tests/unit/planner_strategies.py, and runs sharing GPUs by memory from
tests/unit/test_planner_shared.py): runs of several workspaces, gangs, independent
workers, time limits and none, stopping work, quotas in every dimension, drains, beside
a head."""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st

from runner.planner.estimates import NEVER_HERE, estimate_starts
from runner.planner.plan import Snapshot, plan
from tests.unit.planner_builders import NOW
from tests.unit.planner_strategies import PROPERTY, snapshots
from tests.unit.test_planner_shared import shared_snapshots

# the planner's snapshots, and those of runs sharing GPUs by memory
DRAWN = st.one_of(snapshots(), shared_snapshots())


@PROPERTY
@given(DRAWN)
def test_every_waiting_run_has_an_estimate_that_says_only_what_it_can(snapshot: Snapshot) -> None:
    p = plan(snapshot, NOW)
    estimates = estimate_starts(snapshot, NOW)
    waiting = {w.name for w in snapshot.waiting}
    assert waiting <= set(estimates)
    runs = waiting | {u.run for u in snapshot.running}
    started = {s.run for s in p.starts}
    for name in waiting:
        e = estimates[name]
        assert set(e.after) <= runs, (name, e)  # work of this snapshot, started or not
        assert e.starts_by is None or (not e.after and e.starts_by >= NOW), (name, e)
        if name in started:
            assert e.starts_by == NOW, (name, e)
        reason = p.reasons.get(name)
        if reason is not None and reason.code in NEVER_HERE:
            # larger than the machine or than its quota: it starts after nothing
            assert e.starts_by is None and e.after == (), (name, reason.render(), e)


@PROPERTY
@given(DRAWN)
def test_the_heads_estimate_is_its_shadow_time_or_sooner(snapshot: Snapshot) -> None:
    """The head's "starts by" is a promise against the work behind it. Not against the
    order changing: fair share orders the runs of one priority by their workspaces' use,
    and the work the head waits for ending can put another workspace's run first
    (docs/scheduling.md, "Start estimates"); so can its ending bring a run back under its
    workspace's quota, or a preempted run back to the queue, ahead of the head in
    priority or time. Drawn apart here: the runs of the head's priority are all of its
    workspace, or no workspace of theirs has a quota; no run as urgent as the head waits
    on its quota or is being preempted."""
    p = plan(snapshot, NOW)
    if p.head is None or p.head.shadow is None:
        return
    level = {w.workspace for w in snapshot.waiting if w.priority == p.head.priority}
    assume(
        level == {p.head.workspace} or all(snapshot.workspaces[ws].quota is None for ws in level)
    )
    priorities = {w.name: w.priority for w in snapshot.waiting}
    assume(all(priorities[name] < p.head.priority for name in p.quota_waits))
    victims = [u for u in snapshot.running if u.stopping_for is not None]
    victims += [u for x in p.preemptions for u in snapshot.running if u.unit_id == x.unit_id]
    assume(all(u.priority < p.head.priority for u in victims))
    e = estimate_starts(snapshot, NOW)[p.head.run]
    assert e.promise and e.starts_by is not None, (p.head, e)
    assert e.starts_by <= p.head.shadow, (p.head, e)
