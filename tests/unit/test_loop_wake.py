"""The loop's wait between ticks (Loop.pause): a change planned as soon as the gap allows."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.engine.loop import PLAN_GAP, TICK
from tests.unit.engine_fakes import Engine


def test_a_change_inside_the_gap_waits_only_for_the_rest_of_it(tmp_path: Path) -> None:
    e = Engine(tmp_path)
    e.tick()  # plans: nothing was planned before
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
