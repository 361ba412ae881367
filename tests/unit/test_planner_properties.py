"""Invariants of the planner over random snapshots (hypothesis).

The snapshots draw what users do, together: runs of several workspaces, gangs, time
limits and none, stopping work, quotas in every dimension (GPU memory included) and
quotas full of their own work (in-quota preemption), GPUs drained with work still on
them, beside a head. The planner is given the snapshot as the drain makes it
(``drained_snapshot``); the invariants are checked against the machine as it is
(``Drawn.truth``, made here without the code under test)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.model import Resources, amounts, quota_amounts
from runner.planner.plan import Plan, RunningUnit, Snapshot, WaitingRun, plan, unit_end
from tests.unit.planner_builders import NOW, running, snap, waiting, workspace
from tests.unit.planner_strategies import PROPERTY, Drawn, drawn, snapshots


def _free(snapshot: Snapshot) -> Resources:
    free = snapshot.machine.capacity()
    for unit in snapshot.running:
        free = free - unit.resources
    return free


def _by_name(snapshot: Snapshot) -> dict[str, WaitingRun]:
    return {w.name: w for w in snapshot.waiting}


@PROPERTY
@given(drawn())
def test_nothing_is_given_twice_and_no_drained_gpu(d: Drawn) -> None:
    snapshot = d.truth
    p = plan(d.given, NOW)
    held = [g for u in snapshot.running for g in u.gpus]
    given_out = [g for s in p.starts for worker in s.gpus for g in worker]
    assert len(set(given_out)) == len(given_out)
    assert not set(given_out) & set(held)
    assert set(given_out) <= set(snapshot.machine.gpus)
    assert not set(given_out) & d.drained
    total = Resources()
    runs = _by_name(snapshot)
    for s in p.starts:
        ask = runs[s.run].ask()
        assert [len(g) for g in s.gpus] == [runs[s.run].worker.gpus] * len(s.workers)
        total = total + ask
    assert total.fits_in(_free(snapshot))


def _in_quota_preemptors(snapshot: Snapshot, p: Plan) -> set[str]:
    """The runs preempting their own workspace's work (or waiting for it to stop)."""
    names = {v.for_run.name for v in p.preemptions}
    names |= {u.stopping_for for u in snapshot.running if u.stopping_for is not None}
    head = p.head.run if p.head else None
    texts = ("Preempting ", "Starting: waiting for ")
    return {n for n in names if n != head and (p.reason(n) or "").startswith(texts)}


def _own_stopping(snapshot: Snapshot, name: str) -> list[RunningUnit]:
    """The units already stopping for in-quota preemptor ``name`` that are its room: of
    its own workspace and of strictly lower priority, as its victims are. A unit of
    another workspace stopping for it (stopped while it was the head, before its
    workspace went over its quota) is not: in-quota preemption takes only its own
    workspace's work, so that unit's room is free once it has stopped, for the head as
    for any run."""
    run = _by_name(snapshot)[name]
    return [
        u
        for u in snapshot.running
        if u.stopping_for == name and u.workspace == run.workspace and u.priority < run.priority
    ]


def _freed_for(snapshot: Snapshot, p: Plan, name: str) -> Resources:
    """The room an in-quota preemptor's victims and own stopping units give it."""
    stops = {v.unit_id for v in p.preemptions if v.for_run.name == name}
    stops |= {u.unit_id for u in _own_stopping(snapshot, name)}
    freed = Resources()
    for unit in snapshot.running:
        if unit.unit_id in stops:
            freed = freed + unit.resources
    return freed


def _as_running(snapshot: Snapshot, p: Plan, name: str) -> RunningUnit:
    """A preemptor as the head sees it: holding what it asks and all its victims'
    room from when they have stopped, until its limit (and the grace) ends it."""
    run = _by_name(snapshot)[name]
    stops = {v.unit_id for v in p.preemptions if v.for_run.name == name}
    freed = _freed_for(snapshot, p, name)
    held = Resources(*map(max, amounts(run.ask()), amounts(freed)))  # all its victims' room
    deadlines = [u.stop_deadline or 0.0 for u in _own_stopping(snapshot, name)]
    grace = snapshot.machine.stop_grace
    start_by = max([NOW + grace, *deadlines]) if stops or deadlines else NOW
    assert p.head is not None
    return RunningUnit(f"own-{name}", name, run.workspace, p.head.priority, held, (),
                       start_by, run.time_limit)  # fmt: skip


# On the planner before drained GPUs' memory was given back, this and the next found a
# head preempting work on drained GPUs (or a start refused beside them) in 32 to 702
# examples (three seeds each): 1,000 find it nearly every time.
@settings(PROPERTY, max_examples=1000)
@given(drawn())
def test_nothing_started_delays_the_head(d: Drawn) -> None:
    check_nothing_started_delays_the_head(d.truth, d.given)


def check_nothing_started_delays_the_head(
    snapshot: Snapshot, given: Snapshot | None = None
) -> None:
    """Planned alone with what the plan (of ``given``, else ``snapshot``) started and the
    in-quota preemptors hold, the head comes out as the head, with the same shadow (no
    later, with preemptors behind it: their victims' ends are replaced by their own)."""
    p = plan(given or snapshot, NOW)
    if p.head is None or p.head.preempting:
        return
    runs = _by_name(snapshot)
    # work stopped for an in-quota preemption is the preemptor's room, not the head's
    preemptors = _in_quota_preemptors(snapshot, p)
    gone = {v.unit_id for v in p.preemptions if v.for_run.name in preemptors}
    gone |= {u.unit_id for n in preemptors for u in _own_stopping(snapshot, n)}
    after = {n for n in preemptors if p.positions[n] > p.positions[p.head.run]}
    held = tuple(_as_running(snapshot, p, n) for n in sorted(preemptors))
    as_running = tuple(
        RunningUnit(
            f"new-{s.run}",
            s.run,
            runs[s.run].workspace,
            runs[s.run].priority,
            runs[s.run].ask(),
            tuple(g for w in s.gpus for g in w),
            NOW,
            runs[s.run].time_limit,
        )
        for s in p.starts
    )
    alone = Snapshot(
        snapshot.machine,
        {},
        tuple(u for u in snapshot.running if u.unit_id not in gone) + held + as_running,
        (runs[p.head.run],),
    )
    p2 = plan(alone, NOW)
    assert p2.head is not None and p2.head.run == p.head.run
    if not after:
        assert p2.head.shadow == p.head.shadow
    elif p.head.shadow is not None:  # its victims' ends replaced by its own: no later
        assert p2.head.shadow is not None and p2.head.shadow <= p.head.shadow


def _room_for_the_head(snapshot: Snapshot, p: Plan) -> Resources:
    """The room the head was chosen in: free room and stopping units' room, less what
    started before it. An in-quota preemptor ordered before it holds what it takes
    beyond its victims' and own stopping units' room, and those units are its own
    room (``_own_stopping``): neither is the head's."""
    assert p.head is not None
    runs, at = _by_name(snapshot), p.positions[p.head.run]
    ahead = {n for n in _in_quota_preemptors(snapshot, p) if p.positions[n] < at}
    claimed = {u.unit_id for n in ahead for u in _own_stopping(snapshot, n)}
    room = _free(snapshot)
    for unit in snapshot.running:
        if unit.stopping and unit.unit_id not in claimed:
            room = room + unit.resources
    for s in p.starts:
        if not s.backfill:  # started ahead of the head, before it was chosen
            room = room - runs[s.run].ask()
    for name in ahead:
        taken = runs[name].ask() - _freed_for(snapshot, p, name)
        room = room - Resources(*(max(0, x) for x in amounts(taken)))
    return room


@settings(PROPERTY, max_examples=1000)
@given(drawn())
def test_victims_are_strictly_lower_and_minimal(d: Drawn) -> None:
    check_victims_are_strictly_lower_and_minimal(d.truth, d.given)


def check_victims_are_strictly_lower_and_minimal(
    snapshot: Snapshot, given: Snapshot | None = None
) -> None:
    """Victims are of strictly lower priority, not already stopping; an in-quota
    preemptor's are of its own workspace; the head's are minimal: drop any one and its
    need no longer fits in the room it had when it was chosen (on the GPUs not drained:
    a victim whose room the head cannot use is never chosen)."""
    p = plan(given or snapshot, NOW)
    units = {u.unit_id: u for u in snapshot.running}
    runs = _by_name(snapshot)
    head = p.head.run if p.head else None
    for v in p.preemptions:  # in-quota preemptions: own workspace, strictly lower, not the head
        if v.for_run.name != head:
            preemptor = runs[v.for_run.name]
            assert units[v.unit_id].workspace == preemptor.workspace == v.for_run.workspace
            assert units[v.unit_id].priority < preemptor.priority
            assert not units[v.unit_id].stopping
    victims = [units[v.unit_id] for v in p.preemptions if v.for_run.name == head]
    if not victims:
        return
    assert p.head is not None
    assert all(v.priority < p.head.priority and not v.stopping for v in victims)
    room = _room_for_the_head(snapshot, p)
    freed = Resources()
    for v in victims:
        freed = freed + v.resources
    need = p.head.need
    assert need.fits_in(room + freed)
    for v in victims:
        assert not need.fits_in(room + freed - v.resources)


# Counterexamples Hypothesis found, minimised. In each, workspace b's quota is full of
# its own b0, so its more urgent run preempts b0 (in quota), and "big" is the head.
B0 = running("b0", gpus=(0,), ws="b")
FOUND = [
    # x (another workspace's) is still stopping for urgent, stopped when urgent was the
    # head: it is not urgent's room, the head counts on it at its stop deadline
    pytest.param(
        check_nothing_started_delays_the_head,
        (
            running("x", gpus=(1, 2, 3, 4, 5, 6), ws="a", stop_deadline=10, stopping_for="urgent"),
            waiting("urgent", cpus=1, ws="b", priority=1),
            waiting("big", gpus=4, ws="a", at=1),
        ),
        0,
        ["b0"],
        NOW + 10,
        id="another-workspace-stopping-for-an-in-quota-preemptor",
    ),
    # urgent, ordered first, holds 1 of the 3 free GPUs beyond b0's: the head's 3 need lo
    pytest.param(
        check_victims_are_strictly_lower_and_minimal,
        (
            running("lo", gpus=(1, 2, 3, 4), ws="a", priority=-1),
            waiting("urgent", gpus=2, ws="b", priority=1),
            waiting("big", gpus=3, ws="a", at=1),
        ),
        2,
        ["b0", "lo"],
        NOW + 30,
        id="room-held-for-an-in-quota-preemptor-before-the-head",
    ),
]


@pytest.mark.parametrize(("check", "runs", "quota", "victims", "shadow"), FOUND)
def test_found_counterexamples(
    check: Callable[[Snapshot], None],
    runs: tuple[RunningUnit | WaitingRun, ...],
    quota: int,
    victims: list[str],
    shadow: float,
) -> None:
    snapshot = snap(B0, *runs, workspaces=(workspace("b", gpus=quota, within=True),))
    p = plan(snapshot, NOW)
    assert p.head is not None and p.head.run == "big" and p.head.shadow == shadow
    assert [v.unit_id for v in p.preemptions] == victims
    check(snapshot)


# On the planner before the head kept its quota, this found a run of the head's
# workspace started behind it in 240 to 2,100 examples (five seeds): 3,000 find it
# nearly every time.
@settings(PROPERTY, max_examples=3000)
@given(drawn())
def test_the_head_keeps_its_quota(d: Drawn) -> None:
    """Nothing started behind the head takes the quota it needs: at its shadow time its
    workspace's running work (less what has ended by then, the head's victims included,
    and less what was stopped for an in-quota preemptor, which holds its own ask
    instead) and what the plan started and still runs leave room in the quota for the
    head."""
    snapshot, p = d.truth, plan(d.given, NOW)
    head = p.head
    if head is None:
        return
    ws = snapshot.workspaces.get(head.workspace)
    if ws is None or ws.quota is None:
        return
    shadow = head.shadow
    runs = _by_name(snapshot)
    preemptors = _in_quota_preemptors(snapshot, p)
    gone = {v.unit_id for v in p.preemptions if v.for_run.name in preemptors}
    gone |= {u.unit_id for n in preemptors for u in _own_stopping(snapshot, n)}
    grace = snapshot.machine.stop_grace
    victims = {v.unit_id for v in p.preemptions if v.for_run.name == head.run}
    used = Resources()
    for u in snapshot.running:
        end = min(unit_end(u, grace), NOW + grace) if u.unit_id in victims else unit_end(u, grace)
        ends_by = shadow is not None and end <= shadow
        if u.workspace == head.workspace and u.unit_id not in gone and not ends_by:
            used = used + u.resources
    for s in p.starts:
        run = runs[s.run]
        limit = run.time_limit
        ends_by = shadow is not None and limit is not None and NOW + limit + grace <= shadow
        if run.workspace == head.workspace and not ends_by:
            used = used + run.ask()
    for name in preemptors:
        if runs[name].workspace == head.workspace:
            used = used + runs[name].ask()
    limits = ws.quota.limits()
    for n, (taken, need, limit) in enumerate(
        zip(quota_amounts(used), quota_amounts(head.need), limits, strict=True)
    ):
        assert limit is None or taken + need <= limit, (n, taken, need, limit)


@PROPERTY
@given(snapshots())
def test_over_quota_is_never_the_head(snapshot: Snapshot) -> None:
    p = plan(snapshot, NOW)
    if p.head is not None:
        assert p.head.run not in p.quota_waits
    for name in p.quota_waits:
        assert "quota" in p.reasons[name].render()


@PROPERTY
@given(snapshots(), st.randoms(use_true_random=False))
def test_plan_is_deterministic_whatever_the_input_order(
    snapshot: Snapshot, rnd: random.Random
) -> None:
    first = plan(snapshot, NOW)
    waiting, running = list(snapshot.waiting), list(snapshot.running)
    rnd.shuffle(waiting)
    rnd.shuffle(running)
    shuffled = replace(snapshot, waiting=tuple(waiting), running=tuple(running))
    assert plan(shuffled, NOW) == first
    assert plan(snapshot, NOW) == first


@PROPERTY
@given(snapshots())
def test_every_waiting_run_is_started_or_has_a_reason(snapshot: Snapshot) -> None:
    p: Plan = plan(snapshot, NOW)
    started = {s.run for s in p.starts}
    assert started.isdisjoint(p.reasons)
    assert started | set(p.reasons) == {w.name for w in snapshot.waiting}
    assert sorted(p.order) == sorted(w.name for w in snapshot.waiting)
