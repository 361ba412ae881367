"""Run lengths learned from the store's usage records (runner/engine/learned.py), on the
real loop and store with the fake executor and a clock moved by hand."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from runner.engine.learned import CLASSES, Forecaster, Learned, _class
from runner.planner.estimates import Estimate
from runner.planner.lengths import ByHorizon, Errors, Lengths, RunKey
from tests.unit.engine_fakes import Engine


def test_finished_runs_are_learned_once_each_and_cancelled_ones_not_at_all(
    tmp_path: Path,
) -> None:
    e = Engine(tmp_path, gpus=2)
    learned = Learned(e.store, Lengths(min_runs=2))
    for i, seconds in enumerate((100, 300)):
        e.ran(f"train-{i}", seconds, gpus=1, limit=1000)
    e.submit("gone", gpus=1)
    e.service.delete("gone", e.root)
    e.tick()
    assert learned.refresh() == 3  # two finished, one cancelled: read, not learned
    assert learned.refresh() == 0
    found = learned.lengths.forecast(RunKey("team", e.root.user, "train-9"), limit=1000)
    assert found is not None and found.level == "name" and found.runs == 2
    assert 100 <= found.likely <= 300 * 1.13
    assert learned.lengths.sketches[("machine",)].total == 2


def _behind_one(tmp_path: Path, took: float) -> tuple[Engine, Forecaster]:
    """One GPU: five runs ``job-*`` took ``took`` s each, job-5 runs, and next-0 waits
    behind it; forecasts corrected from the first error seen."""
    e = Engine(tmp_path, gpus=1)
    forecaster = e.loop.forecaster
    forecaster.likely, forecaster.high = ByHorizon(min_seen=1), Errors(min_seen=1)
    forecaster.high_of = {c: Errors(min_seen=1) for c in CLASSES}
    for i in range(5):
        e.ran(f"job-{i}", took, gpus=1)
    e.submit("job-5", gpus=1)
    e.tick()
    e.submit("next-0", gpus=1)
    e.tick()
    return e, forecaster


def test_forecasts_are_corrected_by_how_late_runs_started_against_them(tmp_path: Path) -> None:
    """Runs like ``job-*`` took 100 s; the next one runs 300 s. The run waiting behind it
    was forecast to start in ~100 s and waited 300: the next forecast is three times longer."""
    e, forecaster = _behind_one(tmp_path, took=100)
    first = e.loop.estimates()["next-0"]
    now = e.clock()
    assert first.likely is not None and 80 <= first.likely - now <= 120  # as job-* took
    e.tick(300)
    e.executor.exit("job-5", 0)
    e.tick()
    assert e.store.runs.get("next-0").state == "Running"  # type: ignore[union-attr]
    e.submit("next-1", gpus=1)
    e.tick()
    now = e.clock()
    second = e.loop.estimates()["next-1"]
    assert second.likely is not None and second.likely_by is not None
    assert len(forecaster.likely.all.ratios) == 1 and 2.5 <= forecaster.likely.all.ratios[0] <= 3.5
    # its 90 % error counts for its class (priority 0, made in its first hour) and for
    # all, not for the others
    assert {
        c: len(forecaster.high_of[c].ratios) for c in CLASSES if forecaster.high_of[c].ratios
    } == {(0, False): 1}
    assert len(forecaster.high.ratios) == 1
    # next-0 is forecast ~100 s (the workspace's runs): corrected, three times that
    assert 250 <= second.likely - now <= 400 and second.likely <= second.likely_by


def test_forecasts_made_after_an_hour_of_waiting_learn_from_their_own_kind(
    tmp_path: Path,
) -> None:
    """A run waits two hours behind work that ran far longer than runs like it. Its
    forecast at submit and its forecast once it had waited an hour each err their own
    way, and each corrects only the forecasts of its kind: a run just submitted by the
    first, a run that has waited an hour by the second."""
    assert [_class(5, 0), _class(0, 3599), _class(-2, 3600)] == [(1, False), (0, False), (-1, True)]
    e, forecaster = _behind_one(tmp_path, took=600)
    e.loop.estimates()
    e.tick(3700)  # next-0 has waited an hour: its first forecast of the later kind
    e.loop.estimates()
    assert {k[1] for k in forecaster._first if k[0] == "next-0"} == {False, True}
    e.tick(3500)
    e.executor.exit("job-5", 0)
    e.tick()
    assert e.state("next-0") == "Running"
    e.loop.estimates()  # learned from once it started: each forecast for its own kind
    fresh, late = forecaster.high_of[0, False].ratios, forecaster.high_of[0, True].ratios
    assert len(fresh) == 1 and len(late) == 1 and len(forecaster.high.ratios) == 2

    def by(fresh_factor: float, late_factor: float) -> float:
        """next-1's 90 % start from now, with each kind's errors a ratio as given."""
        for late, factor in ((False, fresh_factor), (True, late_factor)):
            forecaster.high_of[0, late] = Errors(min_seen=1)
            forecaster.high_of[0, late].observe(100, 100 * factor)
        made = e.loop.estimates()["next-1"]
        assert made.likely_by is not None
        return made.likely_by - e.clock()

    e.submit("next-1", gpus=1)  # behind next-0
    e.tick()
    assert by(10, 1) > 5 * by(1, 10)  # just submitted: corrected as fresh forecasts erred
    e.tick(3700)
    assert by(1, 10) > 5 * by(10, 1)  # waited an hour: as the later ones erred


def test_errors_change_nothing_before_enough_are_seen() -> None:
    errors = Errors(min_seen=3)
    errors.observe(100, 200)
    errors.observe(100, 400)
    assert errors.scaled(0.9, 1000) == 1000
    errors.observe(10, 1000)  # a forecast of "now" is no scale: not counted
    assert errors.scaled(0.9, 1000) == 1000
    errors.observe(100, 300)
    assert errors.scaled(0.5, 1000) == 3000 and errors.scaled(0.9, 1000) == 4000
    assert errors.scaled(0.9, 30) == 30  # a forecast of "now" stays now


def test_runs_still_waiting_past_their_forecast_count_before_they_start() -> None:
    """Twenty runs started on time; twenty others still wait, five times their forecast
    wait so far. Learning only from the started, the 90 % start would stay as forecast."""
    errors = Errors(min_seen=20)
    for _ in range(20):
        errors.observe(100, 100)
    assert errors.factor(0.9) == 1.0
    assert errors.factor(0.9, [5.0] * 20) == 5.0  # at least 5: the largest known
    assert errors.factor(0.5, [5.0] * 20) == 1.0  # half started on time
    assert errors.factor(0.5, [0.5] * 20) == 1.0  # not late yet: they say little


def test_only_the_heads_promise_caps_its_90_percent_start() -> None:
    """Runs submitted later with a higher priority can pass any run but the head: a run
    behind it may be forecast to start later than every running run's limit says; the
    head's shadow time is a promise, and no forecast is later."""
    now = 1_000_020.0  # on a minute: the 90 % start is said to the minute, rounded up
    made = Estimate(now + 600, likely=now + 300, likely_by=now + 600, learned_from=40)
    behind = Forecaster._corrected(made, now, [None] * 5, 3.0)
    assert behind.likely_by == now + 1800 and behind.likely == now + 300
    head = Forecaster._corrected(replace(made, promise=True), now, [None] * 5, 3.0)
    assert head.likely_by == now + 600 == head.starts_by


def test_the_likely_start_is_corrected_only_where_no_limit_bounds_it() -> None:
    """Behind work with time limits the lengths are shares of those limits and the likely
    start stands as replayed; behind work without one it is a guess, scaled by how the
    guesses before it erred (here: twice as late)."""
    now = 1_000_020.0
    bounded = Estimate(now + 3600, likely=now + 600, likely_by=now + 3600, learned_from=40)
    twice = [2.0] * 5
    assert Forecaster._corrected(bounded, now, twice, None).likely == now + 600
    unbounded = replace(bounded, starts_by=None)
    assert Forecaster._corrected(unbounded, now, twice, None).likely == now + 1200


def test_a_resumed_runs_earlier_attempts_count_as_run(tmp_path: Path) -> None:
    """Runs like ``job-*`` take 500 s in all (their usage records count every attempt).
    job-5 ran 400 s, was preempted and resumed: the run behind it is forecast to start
    after the 100 s job-5 has left, not after 500 more."""
    e = Engine(tmp_path, gpus=1)
    for i in range(5):
        e.ran(f"job-{i}", 500, gpus=1)
    e.submit("job-5", gpus=1, priority=-5)
    e.tick()
    e.tick(400)
    e.submit("urgent", gpus=1, priority=5)
    e.tick()
    e.executor.exit("job-5", 143)  # it ends on SIGTERM
    e.tick()
    assert e.state("urgent") == "Running"
    e.tick(10)
    e.executor.exit("urgent", 0)
    e.tick()
    e.tick()
    assert e.state("job-5") == "Running" and len({w.attempt for w in e.workers("job-5")}) == 2
    ran = e.store.workers.ran_before(["job-5", "urgent", "absent"])
    assert set(ran) == {"job-5"} and 395 <= ran["job-5"] <= 410
    e.submit("next", gpus=1, priority=-5)  # (of a higher priority it would preempt job-5)
    e.tick()
    now = e.clock()
    forecast = e.loop.estimates()["next"]
    assert forecast.likely is not None and 50 <= forecast.likely - now <= 150, forecast.likely - now
