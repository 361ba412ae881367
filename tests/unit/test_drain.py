"""Drains applied to the planner's input (runner/engine/drain.py), the planner untouched."""

from __future__ import annotations

from runner.engine.drain import Drain, drained_snapshot, explained
from runner.planner.plan import plan
from runner.reasons import ReasonCode
from runner.rows import DrainRow
from tests.unit.planner_builders import NOW, machine, running, snap, waiting

FAN = Drain.of([DrainRow(target="3", reason="fan failing", by="root", at=NOW)])
WHOLE = Drain.of([DrainRow(target="machine", reason="kernel upgrade", by="root", at=NOW)])


def test_no_drain_gives_the_snapshot_as_it_is() -> None:
    s = snap(running("a", gpus=(0,)), waiting("w", gpus=1), m=machine(gpus=4))
    assert drained_snapshot(s, Drain()) is s
    assert explained(plan(s, NOW), s, Drain()) == plan(s, NOW)


def test_a_drained_gpu_is_never_given_and_its_work_counts_only_its_other_gpus() -> None:
    on3 = running("on3", gpus=(2, 3))
    s = snap(on3, waiting("one", gpus=1), waiting("two", gpus=1, at=1), m=machine(gpus=4))
    d = drained_snapshot(s, FAN)
    assert d.machine.gpus == (0, 1, 2)
    assert d.running[0].gpus == (2,) and d.running[0].resources.gpus == 1
    result = plan(d, NOW)
    given = {g for start in result.starts for worker in start.gpus for g in worker}
    assert given == {0, 1}  # 2 is on3's, 3 is drained


def test_a_run_that_needs_a_drained_gpu_says_the_machine_drains() -> None:
    s = snap(waiting("all4", gpus=4), waiting("big", gpus=5, at=1), m=machine(gpus=4))
    result = explained(plan(drained_snapshot(s, FAN), NOW), s, FAN)
    assert result.reasons["all4"].code is ReasonCode.DRAINING
    assert result.reasons["all4"].render() == (
        "Waits: the machine is draining (fan failing): GPU 3 kept out of every plan"
    )
    assert result.reasons["big"].code is ReasonCode.TOO_LARGE  # too large drained or not


def test_the_whole_machine_drained_starts_nothing_and_preempts_nothing() -> None:
    low = running("low", gpus=(0, 1, 2, 3), priority=-5)
    s = snap(low, waiting("free"), waiting("urgent", gpus=4, priority=10), m=machine(gpus=4))
    result = explained(plan(drained_snapshot(s, WHOLE), NOW), s, WHOLE)
    assert result.starts == () and result.preemptions == () and result.head is None
    assert {n: r.render() for n, r in result.reasons.items()} == {
        "free": "Waits: the machine is draining (kernel upgrade)",
        "urgent": "Waits: the machine is draining (kernel upgrade)",
    }
    assert all(r.code is ReasonCode.DRAINING for r in result.reasons.values())
