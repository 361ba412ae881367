"""Preemption applied by the loop, and a stepped wall clock, on a fake executor and clock.

SIGTERM first, SIGKILL only once the grace has passed on the monotonic clock; the victim
queued again (keeping its submission time); the preemptor started once the victim's
GPUs are free. A wall clock stepped by hours moves no time limit and no grace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.executors.base import WorkerLaunch
from tests.unit.engine_fakes import Engine

HOURS = 3600.0
GRACE = 30.0


def _assert_sigterm_sent(e: Engine) -> None:
    """The plan applied: the victim is Stopping after SIGTERM, the preemptor waits."""
    assert e.executor.ops("victim") == ["launch", "stop"]  # SIGTERM, nothing more yet
    [w] = e.workers("victim")
    assert (w.state, w.stop_reason) == ("Stopping", "preempt")
    assert w.stopping_for is not None and w.stopping_for.name == "urgent"
    assert e.state("victim") == "Stopping"
    assert e.events("victim")[-1] == (
        f"Preempted by higher-priority work (urgent): SIGTERM sent, SIGKILL after {GRACE:g} s"
    )
    assert e.state("urgent") == "Queued" and e.executor.ops("urgent") == []
    assert e.events("urgent")[-1] == "Preempting 1 lower-priority worker(s) of victim to start"


def _assert_requeued(e: Engine, submitted: float, kill: list[str]) -> None:
    victim = e.run("victim")
    assert victim.state == "Queued" and victim.submitted_at == submitted
    assert (victim.preemptions, victim.restarts) == (1, 0)
    assert e.reason("victim").startswith(
        "Preempted by higher-priority work (urgent); waiting to run again."
    )
    assert "Preempted by urgent; queued again" in e.events("victim")
    assert e.worker_states("victim") == [(1, "Cancelled")]
    assert e.executor.ops("victim") == ["launch", "stop", *kill, "cleanup"]


@pytest.mark.parametrize(
    ("victim_gpus", "urgent_gpus", "exits_on_term"),
    [
        pytest.param(4, 4, True, id="exits-on-sigterm"),
        pytest.param(4, 4, False, id="ignores-sigterm"),
        pytest.param(3, 2, False, id="one-free-two-asked"),
    ],
)
def test_a_higher_priority_submit_preempts_a_lower_one(
    tmp_path: Path, victim_gpus: int, urgent_gpus: int, exits_on_term: bool
) -> None:
    e = Engine(tmp_path / "home", gpus=4, grace=GRACE)
    submitted = e.submit("victim", gpus=victim_gpus, priority=-5).submitted_at
    e.tick()
    victim_gpu_ids = e.executor.launches[e.executor.handle("victim")].gpus
    freed: list[list[str]] = []

    def look(launch: WorkerLaunch) -> None:  # the victim's workers when urgent starts
        if launch.run == "urgent":
            freed.append([w.state for w in e.workers("victim")])

    e.executor.on_start = look
    e.tick(60)
    e.submit("urgent", gpus=urgent_gpus, priority=5)
    e.tick()
    _assert_sigterm_sent(e)
    kill = []
    if not exits_on_term:
        e.tick(GRACE - 1)
        assert e.executor.ops("victim") == ["launch", "stop"]  # within the grace
        e.tick(1)
        assert e.executor.ops("victim") == ["launch", "stop", "kill"]
        assert e.executor.ops("urgent") == []  # the victim still holds its GPUs
        kill = ["kill"]
    e.executor.exit("victim", 143 if exits_on_term else 137)
    e.tick()
    _assert_requeued(e, submitted, kill)
    assert freed == [["Cancelled"]]  # started only after the victim's worker ended
    assert e.state("urgent") == "Running" and e.executor.ops("urgent") == ["launch"]
    urgent = e.executor.launches[e.executor.handle("urgent")].gpus
    assert len(urgent) == urgent_gpus and set(urgent) <= set(victim_gpu_ids)


def _stubborn(e: Engine, name: str, **fields: Any) -> None:
    """Submit and start a run whose worker ignores SIGTERM (the fake never ends it)."""
    e.submit(name, gpus=1, **fields)
    e.tick()
    assert e.state(name) == "Running"


@pytest.mark.parametrize(
    "step", [pytest.param(2 * HOURS, id="forward"), pytest.param(-2 * HOURS, id="backward")]
)
def test_a_wall_clock_step_moves_no_time_limit(tmp_path: Path, step: float) -> None:
    e = Engine(tmp_path / "home", grace=GRACE)
    _stubborn(e, "limited", limit=600)
    started = e.run("limited").started_at
    e.clock.step_wall(step)
    e.tick(600 - 1)
    assert e.state("limited") == "Running" and e.executor.ops() == ["launch"]
    e.tick(1)  # 600 s on the monotonic clock, whatever the wall says
    assert e.state("limited") == "Stopping" and e.executor.ops() == ["launch", "stop"]
    assert e.run("limited").started_at == started  # shown to people: the wall reading


@pytest.mark.parametrize(
    "step", [pytest.param(2 * HOURS, id="forward"), pytest.param(-2 * HOURS, id="backward")]
)
def test_a_wall_clock_step_moves_no_stop_grace(tmp_path: Path, step: float) -> None:
    e = Engine(tmp_path / "home", grace=GRACE)
    _stubborn(e, "stubborn")
    e.service.delete("stubborn", e.root)
    e.tick()
    assert e.state("stubborn") == "Stopping" and e.executor.ops() == ["launch", "stop"]
    e.clock.step_wall(step)
    e.tick(GRACE - 1)
    assert e.executor.ops() == ["launch", "stop"]  # not cut short, by a forward step
    e.tick(1)
    assert e.executor.ops() == ["launch", "stop", "kill"]  # nor stretched, by a backward one
    e.executor.exit("stubborn", 137)
    e.tick()
    assert e.state("stubborn") == "Cancelled"


def test_one_of_two_independent_workers_is_preempted_and_starts_again_alone(
    tmp_path: Path,
) -> None:
    e = Engine(tmp_path / "home", gpus=2, grace=GRACE)
    e.submit("victim", gpus=1, workers=2, gang=False, priority=-5)
    e.tick()
    e.submit("urgent", gpus=1, priority=5)
    e.tick()
    states = [(w.worker, w.state, w.stop_reason) for w in e.workers("victim")]
    assert states == [(0, "Stopping", "preempt"), (1, "Running", None)]
    assert e.state("victim") == "Running"  # the rest keeps running
    assert e.reason("victim") == "1 of 2 workers stopping (preempted by urgent)"
    assert [(c.op, c.worker) for c in e.executor.calls] == [
        ("launch", 0), ("launch", 1), ("stop", 0)
    ]  # fmt: skip
    e.executor.exit("victim", 143, worker=0)
    e.tick()
    victim = e.run("victim")
    assert (victim.state, victim.preemptions, victim.restarts) == ("Running", 1, 0)
    assert e.state("urgent") == "Running"
    assert e.executor.launches[e.executor.handle("urgent")].gpus == (0,)  # worker 0's GPU
    e.executor.exit("urgent", 0)
    e.tick()
    after = [(w.attempt, w.worker, w.state) for w in e.workers("victim")]
    assert after == [(1, 0, "Cancelled"), (1, 1, "Running"), (2, 0, "Running")]
