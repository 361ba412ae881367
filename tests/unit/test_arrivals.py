"""The work of higher priority arriving while a run waits (runner/planner/arrivals.py), and
the 90 % start it stretches (runner/engine/learned.py ``Forecaster``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.model import Resources
from runner.planner.arrivals import MAX_LOAD, WINDOW, Arrivals
from runner.planner.types import Machine, RunningUnit, Snapshot, WaitingRun
from tests.unit.engine_fakes import Engine

DAY = WINDOW
NOW = 10 * DAY
MACHINE = Machine(gpus=(0, 1, 2, 3), cpu_milli=64_000, memory=1 << 40)


def waiting(name: str, priority: int, *, submitted: float = NOW, gpus: int = 1,
            limit: float | None = None) -> WaitingRun:  # fmt: skip
    return WaitingRun(name, "team", priority, submitted, Resources(gpus=gpus), time_limit=limit)


def running(name: str, priority: int, *, started: float, gpus: int = 1,
            limit: float | None = None) -> RunningUnit:  # fmt: skip
    return RunningUnit(name, name, "team", priority, Resources(gpus=gpus), tuple(range(gpus)),
                       started, limit)  # fmt: skip


def no_length(workspace: str, run: str, limit: float | None) -> float | None:
    return limit


def test_only_work_of_higher_priority_stretches_a_wait() -> None:
    """Four GPUs for a day: a GPU-day of priority 5 finished is a quarter of the machine
    (×4/3 for the runs below it); what priority 0 used stretches priority −5 only."""
    arrivals = Arrivals()
    arrivals.finished(NOW - 3600, 5, DAY)
    arrivals.finished(NOW - 3600, 0, DAY / 2)
    snapshot = Snapshot(MACHINE, waiting=(waiting("a", 5), waiting("b", 0), waiting("c", -5)))
    found = arrivals.stretches(snapshot, NOW, no_length)
    assert found[5] == 1.0
    assert found[0] == pytest.approx(1 / (1 - 0.25))
    assert found[-5] == pytest.approx(1 / (1 - 0.375))


def test_runs_submitted_before_the_window_are_forgotten() -> None:
    arrivals = Arrivals()
    arrivals.finished(NOW - DAY - 1, 5, 2 * DAY)
    arrivals.finished(NOW - 10, 5, DAY)
    snapshot = Snapshot(MACHINE, waiting=(waiting("b", 0),))
    assert arrivals.stretches(snapshot, NOW, no_length)[0] == pytest.approx(1 / (1 - 0.25))
    assert arrivals.stretches(snapshot, NOW + DAY, no_length)[0] == 1.0


def test_a_machine_overloaded_stretches_a_wait_no_further_than_the_cap() -> None:
    arrivals = Arrivals()
    arrivals.finished(NOW, 5, 40 * DAY)
    snapshot = Snapshot(MACHINE, waiting=(waiting("b", 0),))
    assert arrivals.stretches(snapshot, NOW, no_length)[0] == pytest.approx(1 / (1 - MAX_LOAD))


def test_running_and_waiting_runs_count_their_limit_or_learned_length() -> None:
    """A running run started in the window counts its limit (2 GPUs × half a day); one
    started before it, nothing; a waiting one without a limit, its learned length (a
    quarter day on 2 GPUs); one whose length is not known, nothing."""
    snapshot = Snapshot(
        MACHINE,
        running=(running("r1", 5, started=NOW - 60, gpus=2, limit=DAY / 2),
                 running("r0", 5, started=NOW - 2 * DAY, gpus=4, limit=DAY)),
        waiting=(waiting("w1", 5, gpus=2), waiting("w2", 5, gpus=4), waiting("low", 0)),
    )  # fmt: skip

    def learned(workspace: str, run: str, limit: float | None) -> float | None:
        return limit or {"w1": DAY / 4}.get(run)

    # (2 × ½ + 2 × ¼) GPU-days of 4: ρ = 3/8
    found = Arrivals().stretches(snapshot, NOW, learned)[0]
    assert found == pytest.approx(1 / (1 - 3 / 8))


def test_the_90_percent_start_of_a_run_below_busy_urgent_work_is_stretched(
    tmp_path: Path,
) -> None:
    """On one GPU, runs like ``job-*`` took 100 s. A priority 5 run then held the GPU for
    half a day: the 90 % start of a priority 0 run waiting behind ``job-5`` is twice the
    length it is forecast to wait (the likely start stands as replayed)."""
    e = Engine(tmp_path, gpus=1)
    for i in range(5):
        e.ran(f"job-{i}", 100, gpus=1)
    e.ran("urgent", DAY / 2, gpus=1, priority=5)
    e.submit("job-5", gpus=1)
    e.tick()
    e.submit("next", gpus=1)
    e.tick()
    now = e.clock()
    found = e.loop.estimates()["next"]
    assert found.likely is not None and found.likely_by is not None
    assert 90 <= found.likely - now <= 110  # as job-* took, stretched by nothing
    # 100 s (a little more at 90 %, the sketch's width) doubled, rounded up to the minute
    assert 200 <= found.likely_by - now <= 300


def test_a_run_without_a_limit_counts_its_learned_length_as_it_is_learned_now(
    tmp_path: Path,
) -> None:
    """The lengths read for the arrivals are kept between estimates while nothing more
    was learned, and read again once something was."""
    from runner.engine.learned import Learned
    from runner.planner.lengths import Lengths, RunKey
    from runner.store.db import Store

    lengths = Lengths(min_runs=1)
    learned = Learned(Store(tmp_path / "state.db"), lengths)
    lengths.learn(RunKey("team", "ana", "sweep-1"), DAY / 4)
    snapshot = Snapshot(MACHINE, waiting=(waiting("sweep-2", 5), waiting("low", 0)))
    assert learned.stretches(snapshot, NOW, lambda run: "ana")[0] == pytest.approx(1 / (1 - 1 / 16))
    for _ in range(3):  # the sweep's runs turn out longer: a day each
        lengths.learn(RunKey("team", "ana", "sweep-1"), DAY)
    found = learned.stretches(snapshot, NOW, lambda run: "ana")[0]
    now_took = lengths.forecast(RunKey("team", "ana", "sweep-2"))
    assert now_took is not None and found == pytest.approx(1 / (1 - now_took.likely / 4 / DAY))
    assert found > 1.2  # a quarter day no more
