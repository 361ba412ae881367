"""Start estimates: the planner replayed forward; bounds that hold."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from runner.planner.estimates import estimate_starts, with_forecasts
from runner.planner.lengths import MIN_RUNS, Lengths, RunKey
from runner.planner.plan import RunningUnit, Snapshot, plan
from tests.unit.planner_builders import HOUR, NOW, machine, running, snap, waiting, workspace


def test_worked_example() -> None:
    s = snap(
        running("a", gpus=tuple(range(6)), started=0, limit=HOUR),
        waiting("big", gpus=8, limit=2 * HOUR, at=0),
        waiting("short", gpus=2, limit=1800, at=1),
        waiting("after-big", gpus=4, limit=HOUR, at=2),
        waiting("nolimit", gpus=8, at=3),
        waiting("last", gpus=8, limit=60, at=4),
    )
    e = estimate_starts(s, NOW)
    assert e["short"].starts_by == NOW
    assert e["big"].starts_by == NOW + HOUR + 30
    assert e["after-big"].starts_by == NOW + HOUR + 30 + 2 * HOUR + 30
    assert e["nolimit"].starts_by == e["after-big"].starts_by + HOUR + 30
    # the head's is its shadow time, a promise; the others' can move later
    assert e["big"].promise and not any(e[n].promise for n in ("short", "after-big", "nolimit"))
    # behind a run without a time limit: no bound, and who is in the way
    assert e["last"].starts_by is None and e["last"].after == ("nolimit",)


def test_running_work_without_a_limit_is_named() -> None:
    e = estimate_starts(snap(running("forever", gpus=tuple(range(8))), waiting("w", gpus=1)), NOW)
    assert e["w"].starts_by is None and e["w"].after == ("forever",)


def test_a_run_larger_than_the_machine_or_its_quota_waits_for_no_one() -> None:
    """It starts on no end of running work: its estimate names none (it says why it cannot
    run), while a run that fits names the work without a limit in its way."""
    s = snap(running("forever", gpus=tuple(range(8))), waiting("huge", gpus=99, limit=HOUR),
             waiting("w", gpus=1, limit=HOUR, at=1),
             waiting("over", gpus=4, limit=HOUR, at=2, ws="lab"),
             workspaces=(workspace("lab", gpus=2),))  # fmt: skip
    e = estimate_starts(s, NOW)
    assert e["huge"].starts_by is None and e["huge"].after == ()
    assert e["over"].starts_by is None and e["over"].after == ()
    assert e["w"].starts_by is None and e["w"].after == ("forever",)


def test_preempted_work_waits_again_in_the_replay() -> None:
    s = snap(
        running("low", gpus=tuple(range(8)), priority=-5, limit=10 * HOUR, started=-60),
        waiting("urgent", gpus=8, priority=5, limit=HOUR, at=0),
        waiting("next", gpus=8, priority=0, limit=HOUR, at=1),
    )
    e = estimate_starts(s, NOW)
    assert e["urgent"].starts_by == NOW + 30  # the victim's grace
    assert e["next"].starts_by == NOW + 30 + HOUR + 30


def _replay(snapshot: Snapshot, durations: dict[str, float], grace: float) -> dict[str, float]:
    """Run the queue (in simulation): each waiting run ends after its duration,
    running work at its time limit plus the grace."""
    t, started = NOW, {}
    running = list(snapshot.running)
    ends = {u.unit_id: u.started_at + (u.time_limit or math.inf) + grace for u in running}
    pending = {w.name: w for w in snapshot.waiting}
    while pending:
        result = plan(replace(snapshot, running=tuple(running), waiting=tuple(pending.values())), t)
        assert not result.preemptions
        for s in result.starts:
            run = pending.pop(s.run)
            started[run.name] = t
            gpus = tuple(g for w in s.gpus for g in w)
            running.append(RunningUnit(run.name, run.name, run.workspace, run.priority,
                                       run.ask(), gpus, t, run.time_limit))  # fmt: skip
            ends[run.name] = t + durations[run.name]
        if not pending:
            break
        t = min(ends[u.unit_id] for u in running)
        running = [u for u in running if ends[u.unit_id] > t]
    return started


def _random_queue(seed: int) -> Snapshot:
    rnd = random.Random(seed)
    runs = [
        running(
            f"r{i}",
            gpus=(2 * i, 2 * i + 1),
            limit=rnd.choice([600, 3600, 7200]),
            started=-rnd.randint(0, 500),
        )
        for i in range(rnd.randint(0, 4))
    ]
    queue = [
        waiting(f"w{i}", gpus=rnd.choice([1, 2, 4, 8]), limit=rnd.choice([300, 1800, 3600]), at=i)
        for i in range(rnd.randint(1, 12))
    ]
    return snap(*runs, *queue, m=machine(grace=30))


@pytest.mark.parametrize("seed", range(40))
def test_runs_that_use_their_whole_time_limit_start_by_their_estimate(seed: int) -> None:
    """Work runs to its limit and is stopped with the grace: the estimate is exact."""
    s = _random_queue(seed)
    estimates = estimate_starts(s, NOW)
    grace = s.machine.stop_grace
    started = _replay(s, {w.name: (w.time_limit or 0) + grace for w in s.waiting}, grace)
    for name, at in started.items():
        assert estimates[name].starts_by == at, name


@pytest.mark.parametrize("seed", range(40))
def test_the_head_starts_by_its_estimate_whatever_ends_early(seed: int) -> None:
    """Earlier ends can reorder who backfills (list scheduling's anomalies), but
    the head is protected: it never starts later than its estimate."""
    s = _random_queue(seed)
    head = plan(s, NOW).head
    if head is None:
        return
    bound = estimate_starts(s, NOW)[head.run].starts_by
    rnd = random.Random(seed)
    durations = {w.name: rnd.uniform(0.1, 1.0) * (w.time_limit or 0) for w in s.waiting}
    started = _replay(s, durations, s.machine.stop_grace)
    assert bound is not None and started[head.run] <= bound


def test_a_forecast_ends_work_when_its_learned_length_says_and_plans_with_the_limits() -> None:
    s = snap(
        running("a", gpus=tuple(range(8)), started=-100, limit=HOUR),
        waiting("big", gpus=8, limit=2 * HOUR, at=0),
        waiting("nolimit", gpus=8, at=1),
    )
    took = {"a": 600.0, "big": 900.0}  # seconds from each run's start; nolimit: not known
    forecast = estimate_starts(s, NOW, length=lambda unit: took.get(unit.run))
    assert forecast["big"].starts_by == NOW + 500  # a ends 600 s after its start
    assert forecast["nolimit"].starts_by == NOW + 500 + 900
    bound = estimate_starts(s, NOW)
    assert bound["big"].starts_by == NOW - 100 + HOUR + 30  # the limit and the grace
    late = estimate_starts(s, NOW, length=lambda unit: 2 * HOUR)  # past its limit: capped
    assert late["big"].starts_by == bound["big"].starts_by


def _learned(runs: int, seconds: float, name: str = "job-1") -> Lengths:
    """Lengths learned from ``runs`` finished runs of ``name``'s group, each ``seconds``."""
    lengths = Lengths()
    for _ in range(runs):
        lengths.learn(RunKey("default", "ann", name), seconds)
    return lengths


def test_no_forecast_before_enough_runs_have_finished() -> None:
    s = snap(running("job-7", gpus=tuple(range(8)), started=-100), waiting("w", gpus=8))
    bounds = estimate_starts(s, NOW)
    made = with_forecasts(s, NOW, bounds, _learned(MIN_RUNS - 1, 600), lambda _: "ann")
    assert made["w"].likely is None and made["w"].likely_by is None
    assert made["w"].learned_from == MIN_RUNS - 1
    assert made["w"].after == ("job-7",)  # the bound's answer stays as it was


def test_a_forecast_behind_work_without_a_limit_from_what_similar_runs_took() -> None:
    """No bound (job-7 has no limit), but runs like it took 10 minutes: it is likely to
    end 500 s from now, having run 100 s; ``w`` starts then."""
    s = snap(running("job-7", gpus=tuple(range(8)), started=-100), waiting("w", gpus=8))
    bounds = estimate_starts(s, NOW)
    assert bounds["w"].starts_by is None
    made = with_forecasts(s, NOW, bounds, _learned(20, 600), lambda _: "ann")
    w = made["w"]
    assert w.learned_from == 20 and w.likely is not None and w.likely_by is not None
    assert NOW + 400 <= w.likely <= w.likely_by <= NOW + 600  # one bucket's error
    # another owner's runs are another group: the workspace's and the machine's decide
    other = with_forecasts(s, NOW, bounds, _learned(20, 600), lambda _: "bob")["w"]
    assert other.likely is not None and abs(other.likely - w.likely) < 120


def test_a_resumed_run_is_forecast_to_end_after_what_it_has_not_run_yet() -> None:
    """Runs like job-7 take 10 minutes in all. job-7 ran 400 s before it was preempted,
    resumed 100 s ago: it is likely to end in 100 s, not in the 500 s a fresh start has."""
    s = snap(running("job-7", gpus=tuple(range(8)), started=-100), waiting("w", gpus=8))
    bounds = estimate_starts(s, NOW)
    fresh = with_forecasts(s, NOW, bounds, _learned(20, 600), lambda _: "ann")["w"]
    resumed = with_forecasts(s, NOW, bounds, _learned(20, 600), lambda _: "ann",
                             ran=lambda _: {"job-7": 400.0})["w"]  # fmt: skip
    assert fresh.likely is not None and resumed.likely is not None
    assert NOW + 400 <= fresh.likely <= NOW + 600
    assert NOW <= resumed.likely <= NOW + 200 and resumed.likely == fresh.likely - 400
    assert resumed.likely_by is not None and resumed.likely_by <= NOW + 200


def test_the_heads_forecast_is_never_later_than_its_promise() -> None:
    """Learned lengths longer than the limit allows: the head's shadow caps its forecast."""
    s = snap(running("job-7", gpus=tuple(range(8)), started=-100, limit=HOUR), waiting("w", gpus=8))
    bounds = estimate_starts(s, NOW)
    assert bounds["w"].promise
    made = with_forecasts(s, NOW, bounds, _learned(20, 100 * HOUR), lambda _: "ann")["w"]
    assert made.starts_by is not None and made.likely_by is not None and made.likely is not None
    assert made.likely <= made.likely_by <= made.starts_by
