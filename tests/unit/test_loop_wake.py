"""The loop's wait between ticks (Loop.pause): a change planned as soon as the gap allows."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.engine.loop import MIN_GAP, PLAN_GAP, TICK
from tests.unit.engine_fakes import Engine


def test_a_change_inside_the_gap_waits_only_for_the_rest_of_it(tmp_path: Path) -> None:
    e = Engine(tmp_path)
    e.tick()  # plans: nothing was planned before
    e.loop.status.last_plan_ms = 80.0  # as a long queue's plan takes: the gap is its cap
    assert e.loop.pause() == TICK  # nothing changed since
    e.clock.advance(0.03)
    e.submit("a")  # pokes: dirty, 30 ms after the plan
    e.loop.tick()  # too soon to plan again
    assert e.state("a") == "Queued"
    assert e.loop.pause() == pytest.approx(PLAN_GAP - 0.03)
    e.clock.advance(PLAN_GAP)
    assert e.loop.pause() == 0.0  # the gap has passed: the next tick plans
    e.loop.tick()
    assert e.state("a") != "Queued"
    assert e.loop.pause() == TICK


@pytest.mark.parametrize(("plan_ms", "gap"), [(0.5, MIN_GAP), (20.0, 0.04), (400.0, PLAN_GAP)])
def test_the_gap_is_twice_the_last_plan_within_its_bounds(
    tmp_path: Path, plan_ms: float, gap: float
) -> None:
    e = Engine(tmp_path)
    e.tick()
    e.loop.status.last_plan_ms = plan_ms
    assert e.loop.gap() == pytest.approx(gap)


def test_a_change_after_a_cheap_plan_is_planned_at_once(tmp_path: Path) -> None:
    """A submit right after another, to a short queue: no wait for a long gap."""
    e = Engine(tmp_path)
    e.tick()
    e.loop.status.last_plan_ms = 1.0
    e.clock.advance(0.02)  # 20 ms after the plan
    e.submit("b")
    assert e.loop.pause() == 0.0
    e.loop.tick()
    assert e.state("b") != "Queued"
