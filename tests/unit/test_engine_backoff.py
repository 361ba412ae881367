"""The restart back-off (runner/engine/backoff.py) on the real loop and store, a fake
executor and a clock moved by hand: the wait doubles, is capped, starts again after a
long attempt, holds nothing, runs on the monotonic clock, and says so when a run exits at
once."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.durations import utc_second
from runner.engine.backoff import AT_ONCE_HINT, Backoff, Failure
from runner.reasons import ReasonCode
from tests.unit.engine_fakes import Engine

BACKOFF = Backoff(10.0, 40.0)


def _engine(tmp_path: Path, gpus: int = 4) -> Engine:
    return Engine(tmp_path / "home", gpus=gpus, backoff=BACKOFF)


def _fail(e: Engine, name: str, code: int = 2, worker: int = 0) -> None:
    e.executor.exit(name, code, worker=worker)
    e.tick()


def _wait_until_started(e: Engine, name: str, attempts: int, most: float) -> float:
    """Tick by 0.5 s until the run's attempt ``attempts`` starts; the seconds it took."""
    waited = 0.0
    while e.run(name).attempts < attempts:
        assert waited <= most, f"{name} not started again within {most} s"
        e.tick(0.5)
        waited += 0.5
    return waited


def test_the_wait_doubles_up_to_its_most_and_the_budget_is_still_spent(tmp_path: Path) -> None:
    e = _engine(tmp_path)
    e.submit("flaky", gpus=1, restart_limit=4)
    e.tick()
    waits, reasons = [], []
    for attempt in range(2, 6):
        _fail(e, "flaky")
        run = e.run("flaky")
        assert run.state == "Queued" and run.reason is not None
        reasons.append(e.reason("flaky"))
        assert run.reason.code is (
            ReasonCode.EXITS_AT_ONCE if attempt >= 4 else ReasonCode.RESTARTING
        )
        waits.append(_wait_until_started(e, "flaky", attempt, 60))
    assert waits == [10.0, 20.0, 40.0, 40.0]  # 10 s, doubled, at most 40 s
    # the clock starts at 08:00:00 UTC; each failure says when its wait ends (failed at
    # 08:00:01, 08:00:11.5, 08:00:32: 10 s, 20 s, 40 s later)
    assert reasons[:2] == [
        "Restarting at 08:00:11 UTC (restart 1 of 4): worker 0 exited with code 2",
        "Restarting at 08:00:31 UTC (restart 2 of 4): worker 0 exited with code 2",
    ]
    assert reasons[2] == (
        f"Restarting at 08:01:12 UTC (restart 3 of 4): worker 0 exited with code 2; {AT_ONCE_HINT}"
    )
    _fail(e, "flaky")
    assert e.state("flaky") == "Failed"
    assert e.reason("flaky") == (
        f"Failed: worker 0 exited with code 2; the restart budget (4) is spent; {AT_ONCE_HINT}"
    )
    events = [m for m in e.events("flaky") if m.startswith("Restarting")]
    assert events == reasons  # each restart's event says what its reason says


def test_an_attempt_that_ran_ten_minutes_starts_the_wait_again_from_the_first(
    tmp_path: Path,
) -> None:
    e = _engine(tmp_path)
    e.submit("long", gpus=1)
    e.tick()
    for attempt in (2, 3):
        _fail(e, "long")
        _wait_until_started(e, "long", attempt, 60)
    e.tick(600)  # this attempt runs ten minutes, then fails
    _fail(e, "long")
    failed = e.clock.wall()
    assert e.reason("long") == (
        f"Restarting at {utc_second(failed + 10, failed)} (restart 3 of 10):"
        " worker 0 exited with code 2"
    )
    assert _wait_until_started(e, "long", 4, 60) == 10.0


def test_nothing_is_held_for_a_run_that_backs_off(tmp_path: Path) -> None:
    """A run backing off is out of the order: a later run asking every GPU starts at once,
    and the failed run waits for it as any queued run does once its wait is over."""
    e = _engine(tmp_path, gpus=2)
    e.submit("first", gpus=2, priority=5)
    e.tick()
    e.submit("later", gpus=2)
    _fail(e, "first")
    assert e.state("first") == "Queued" and e.state("later") == "Running"
    e.tick(12)
    assert e.state("first") == "Queued"
    assert e.run("first").reason is not None
    assert e.run("first").reason.code is not ReasonCode.RESTARTING  # waits in the order now


def test_the_wait_is_measured_on_the_monotonic_clock(tmp_path: Path) -> None:
    e = _engine(tmp_path)
    e.submit("job", gpus=1)
    e.tick()
    _fail(e, "job")
    e.clock.step_wall(3600)  # the wall clock jumps an hour: the wait is not over
    e.tick(1)
    assert e.state("job") == "Queued" and e.run("job").attempts == 1
    assert _wait_until_started(e, "job", 2, 60) == 9.0


def test_an_independent_worker_waits_alone_while_its_sibling_runs(tmp_path: Path) -> None:
    e = _engine(tmp_path)
    e.submit("pair", gpus=1, workers=2, gang=False)
    e.tick()
    _fail(e, "pair", worker=1)
    assert e.state("pair") == "Running"
    e.tick(5)
    assert [(w.attempt, w.worker, w.state) for w in e.workers("pair")] == [
        (1, 0, "Running"), (1, 1, "Failed"),
    ]  # fmt: skip
    e.tick(5)
    assert (2, 1, "Running") in [(w.attempt, w.worker, w.state) for w in e.workers("pair")]


@pytest.mark.parametrize(
    ("lived", "fails_before", "quick_before", "expected"),
    [
        pytest.param(1, 0, 0, Failure(1, 1, 10), id="first"),
        pytest.param(1, 2, 2, Failure(3, 3, 40), id="third-at-once"),
        pytest.param(30, 2, 2, Failure(3, 0, 40), id="not-at-once"),
        pytest.param(600, 5, 0, Failure(1, 0, 10), id="ran-ten-minutes"),
        pytest.param(1, 70, 0, Failure(71, 1, 40), id="no-overflow"),
    ],
)  # fmt: skip
def test_a_failure_is_counted(
    lived: float, fails_before: int, quick_before: int, expected: Failure
) -> None:
    assert Failure.of(BACKOFF, lived, fails_before, quick_before) == expected


def test_no_backoff_restarts_at_once() -> None:
    failure = Failure.of(Backoff(0, 0), 1, 3, 3)
    assert failure.delay == 0
    now = 1_800_000_000.0  # 2027-01-15 08:00:00 UTC
    assert failure.restarting("worker 0 exited with code 1", 4, 10, now).render() == (
        f"Restarting (restart 4 of 10): worker 0 exited with code 1; {AT_ONCE_HINT}"
    )


def test_the_reason_says_when_the_wait_ends_not_how_long_it_is() -> None:
    """A stored reason is not redrawn: a countdown in it would be wrong a minute later.
    It says the time, to the second it falls in, with the date on another UTC day."""
    now = 1_800_000_000.0  # 2027-01-15 08:00:00 UTC
    assert (
        Failure(1, 0, 160.7).restarting("x", 1, 2, now).render()
        == "Restarting at 08:02:40 UTC (restart 1 of 2): x"
    )
    midnight = 1_800_057_600.0  # 2027-01-16 00:00:00 UTC
    assert (
        Failure(1, 0, 40).restarting("x", 1, 2, midnight - 10).render()
        == "Restarting at 2027-01-16 00:00:30 UTC (restart 1 of 2): x"
    )
