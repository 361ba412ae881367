"""The planner's rules are written once; where a faster twin stands beside the general
rule, a drawn queue binds the two: the plan ``plan`` makes equals the one made the general
way (``plan_generally``: every GPU placed through the pool of shares, or every run
visited, the walk's fast path off), for whole-GPU queues with quotas, drains, gangs, holds of
GPUs by preempted runs and in-quota preemptors beside a head (the property tests' draw).
"""

from __future__ import annotations

from hypothesis import assume, given

from runner.planner.plan import Plan, Snapshot, plan, plan_generally
from tests.unit.planner_builders import NOW
from tests.unit.planner_strategies import PROPERTY, snapshots


def _seen(result: Plan) -> tuple[object, ...]:
    """All of a plan that anybody reads: what starts where and why, who is preempted
    for whom, the head, every reason and the order."""
    reasons = {name: r.render() for name, r in result.reasons.items()}
    codes = {name: r.code for name, r in result.reasons.items()}
    return (result.starts, result.preemptions, result.head, reasons, codes, result.order,
            result.quota_waits)  # fmt: skip


@PROPERTY
@given(snapshots())
def test_whole_gpus_plan_as_a_pool_of_full_shares(snapshot: Snapshot) -> None:
    """``make_head``, ``choose_victims`` and ``replay_shadow`` for whole GPUs give what
    their pool twins give with no GPU shared, but where docs/scheduling.md's rules for
    shared GPUs are stricter on purpose: behind a head whose start is unknown nothing
    takes GPU room, and an in-quota preemptor holds the room it is placed on and its
    victims' until it ends (with whole GPUs it takes its victims' GPUs only)."""
    fast = plan(snapshot, NOW)
    unknown = fast.head is not None and fast.head.shadow is None
    in_quota = any(fast.head is None or p.for_run.name != fast.head.run
                   for p in fast.preemptions)  # fmt: skip
    pooled = plan_generally(snapshot, NOW, pooled=True, fast=True)
    pooled_in_quota = any(pooled.head is None or p.for_run.name != pooled.head.run
                          for p in pooled.preemptions)  # fmt: skip
    head = None if fast.head is None else fast.head.run
    stopping_for_one = any(u.stopping_for not in (None, head) for u in snapshot.running)
    assume(not (unknown or in_quota or pooled_in_quota or stopping_for_one))
    assert _seen(fast) == _seen(pooled)


@PROPERTY
@given(snapshots())
def test_the_walks_fast_path_is_a_visit(snapshot: Snapshot) -> None:
    """A run the fast path sets waiting (over its quota; behind the head, not fitting)
    waits as ``visit`` would have it wait."""
    fast = plan(snapshot, NOW)
    assert _seen(fast) == _seen(plan_generally(snapshot, NOW, pooled=False, fast=False))
