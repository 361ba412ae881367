"""One published state: a plan at once, its estimates by the helper thread, each a new
immutable ``Published`` (runner/engine/published.py)."""

from __future__ import annotations

import asyncio
import threading
import time

from runner.engine.backend import LoopStatus
from runner.engine.published import ESTIMATE_EVERY, NOTHING, Publisher
from runner.planner.estimates import Estimate
from runner.planner.plan import Plan, plan
from runner.shown import QueueHead, Shown
from tests.unit.planner_builders import NOW, machine, running, snap, waiting


def _plan(*names: str) -> Plan:
    """A real plan with ``names`` waiting behind a run holding the only GPU."""
    blocker = running("blocker", gpus=(0,), limit=3600)
    return plan(snap(blocker, *(waiting(n, gpus=1) for n in names), m=machine(gpus=1)), NOW)


def test_a_run_the_plan_starts_holds_no_place_in_the_queue_shown() -> None:
    """Two GPUs free: the plan starts the first run of its order; the head behind it is
    shown at 1, not 2 (until the next plan, people saw a gap before the head)."""
    p = plan(snap(*(waiting(n, gpus=g, at=i) for i, (n, g) in enumerate(
        [("first", 2), ("head", 2), ("next", 1)])), m=machine(gpus=2)), NOW)  # fmt: skip
    assert [s.run for s in p.starts] == ["first"] and p.head is not None
    assert p.head.run == "head"
    assert p.positions == {"first": 1, "head": 2, "next": 3}  # the planner's own order
    assert p.queue_positions == {"head": 1, "next": 2}
    status = LoopStatus()
    Publisher(status, Estimator(), lambda: None).planned(p)
    shown = status.published.shown
    assert dict(shown.positions) == {"head": 1, "next": 2}
    assert shown.placed == {"first", "head", "next"}  # taken in the order: a why waits no more


class Estimator:
    """Estimates as the loop's replay gives them, counted, slow on demand."""

    def __init__(self, delay: float = 0.0) -> None:
        self.calls = 0
        self.delay = delay
        self.values: dict[str, Estimate] = {"a": Estimate(NOW + 3600)}

    def __call__(self) -> dict[str, Estimate]:
        self.calls += 1
        time.sleep(self.delay)
        return dict(self.values)


def test_a_plan_is_published_at_once_and_its_estimates_with_it_later() -> None:
    status, estimator, told = LoopStatus(), Estimator(), []
    publisher = Publisher(status, estimator, lambda: told.append(1))
    assert status.published is NOTHING and status.plan is None
    first = _plan("a")
    publisher.planned(first)
    shown = status.published
    assert (shown.plan, shown.current, dict(shown.estimates)) == (first, False, {})
    publisher.planned(first)  # the same plan object: nothing new
    assert status.published is shown
    publisher.made(shown, estimator())
    made = status.published
    assert made.plan is first and made.current and made.version == shown.version + 1
    assert set(made.estimates) == {"a"} and told == [1]  # the stream is told
    publisher.made(made, estimator())  # the same values: only when they were made
    again = status.published
    assert (again.version, again.estimates, told) == (made.version, made.estimates, [1])
    assert again.estimates is made.estimates and again.made_at >= made.made_at
    second = _plan("a", "b")
    publisher.planned(second)  # the plan moves while estimates for the first are made
    late = status.published
    publisher.made(made, {"a": Estimate(NOW + 7200)})
    now = status.published
    assert now.plan is second and not now.current  # an earlier plan's: not current
    assert now.estimates["a"].starts_by == NOW + 7200 and now.version == late.version + 1


def test_what_the_faces_are_shown_is_made_once_with_each_publication() -> None:
    """``Published.shown``: the head as the planner protects it, each waiting run's place
    and the estimates, fresh for ESTIMATE_EVERY once made for their plan (the API reads
    only this)."""
    status, estimator = LoopStatus(), Estimator()
    publisher = Publisher(status, estimator, lambda: None)
    assert status.published.shown == Shown(0, False, None)  # nothing planned yet
    first = _plan("a", "b")
    publisher.planned(first)
    shown = status.published.shown
    assert first.head is not None and shown.planned and shown.version == 1
    assert shown.head == QueueHead(first.head.run, first.head.workspace, first.head.shadow,
                                   first.head.held_gpus, first.head.preempting)  # fmt: skip
    assert shown.is_head("a") and not shown.is_head("b")
    assert dict(shown.positions) == {"a": 1, "b": 2} and not shown.fresh(time.monotonic())
    publisher.made(status.published, estimator())
    made = status.published.shown
    assert made.estimates is status.published.estimates and made.version == 2
    assert made.fresh(time.monotonic()) and not made.fresh(made.made_at + ESTIMATE_EVERY)


def test_the_helper_estimates_a_burst_of_plans_once_for_the_latest() -> None:
    status, estimator = LoopStatus(), Estimator(delay=0.2)
    status.watchers = 1  # a dashboard looks: estimates after each plan
    publisher, stop = Publisher(status, estimator, lambda: None), threading.Event()
    publisher.start(stop)
    try:
        assert status.estimating
        plans = [_plan("a", *(f"r{i}" for i in range(n))) for n in range(10)]
        for p in plans:  # ten plans while the first estimates take 0.2 s
            publisher.planned(p)
            time.sleep(0.01)
        deadline = time.monotonic() + 10
        while not (status.published.current and status.published.plan is plans[-1]):
            assert time.monotonic() < deadline, status.published
            time.sleep(0.01)
        assert 1 <= estimator.calls <= 3  # not one a plan
    finally:
        stop.set()
    deadline = time.monotonic() + 10
    while status.estimating:
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_a_failing_estimate_leaves_the_plan_published_and_the_helper_alive() -> None:
    status, stop = LoopStatus(), threading.Event()
    failures = [RuntimeError("the store is gone")]

    def estimate() -> dict[str, Estimate]:
        if failures:
            raise failures.pop()
        return {"a": Estimate(None)}

    publisher = Publisher(status, estimate, lambda: None)
    status.watchers = 1
    publisher.start(stop)
    try:
        first = _plan("a")
        publisher.planned(first)
        time.sleep(0.1)
        assert status.published.plan is first and not status.published.current
        publisher.planned(_plan("a", "b"))  # the next plan tries again
        deadline = time.monotonic() + 10
        while not status.published.current:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert set(status.published.estimates) == {"a"}
    finally:
        stop.set()


def test_nobody_looking_no_estimates_are_made_until_a_request_asks() -> None:
    """A script submitting a thousand runs with no dashboard open pays for no replay of
    the queue; the first request that shows estimates asks, and they are made then."""
    status, estimator, stop = LoopStatus(), Estimator(), threading.Event()
    publisher = Publisher(status, estimator, lambda: None)
    publisher.start(stop)
    try:
        for n in range(5):
            publisher.planned(_plan("a", *(f"r{i}" for i in range(n))))
            time.sleep(0.02)
        time.sleep(0.1)
        assert estimator.calls == 0 and not status.published.current
        status.asking = 1  # a request waits, as runner/api/why.py's published() counts it
        status.ask_estimates()
        deadline = time.monotonic() + 10
        while not status.published.current:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        status.asking = 0
        assert estimator.calls == 1
        publisher.planned(_plan("a", "b", "c", "d", "e", "f"))  # nobody asks: none made
        time.sleep(0.1)
        assert estimator.calls == 1 and not status.published.current
        status.watchers = 1  # a dashboard opens: estimates follow the plans
        status.wake_estimates.set()
        deadline = time.monotonic() + 10
        while not status.published.current:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert estimator.calls == 2
    finally:
        stop.set()


def test_a_request_before_the_first_plan_does_not_wait() -> None:
    """Nothing planned yet (a daemon just started, or whose executor never answered): a
    request has nothing to wait for, so it asks for nothing and answers at once."""
    from types import SimpleNamespace

    from runner.api.why import published
    from runner.service.loopview import LoopView

    status = LoopStatus()
    status.estimating = True  # the helper runs, but has no plan to estimate
    loop = LoopView(SimpleNamespace(status=status, capabilities=None))  # type: ignore[arg-type]
    shown = asyncio.run(published(SimpleNamespace(loop=loop)))  # type: ignore[arg-type]
    assert shown is NOTHING.shown and status.asking == 0 and not status.wake_estimates.is_set()
