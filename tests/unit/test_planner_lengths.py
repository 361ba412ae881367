"""Learned run lengths: the sketch's quantiles, the groups, the conditioning on elapsed
time, the cap by the time limit and the bound per workspace (runner/planner/lengths.py)."""

from __future__ import annotations

import random

import pytest

from runner.planner.lengths import WIDER, Lengths, RunKey, Sketch, stem


def test_a_name_stem_keeps_the_words_and_drops_the_numbers() -> None:
    assert stem("train-lr0.1") == stem("train-lr0.3") == "train-lr*"
    assert stem("sweep-7-seed42") == "sweep-*-seed*"
    assert stem("eval") == "eval"


@pytest.mark.parametrize("q", [0.1, 0.5, 0.9])
def test_the_sketch_quantiles_are_within_a_bucket_of_the_true_ones(q: float) -> None:
    rng = random.Random(4)
    samples = sorted(rng.lognormvariate(7, 1.2) for _ in range(5000))
    sketch = Sketch()
    for s in samples:
        sketch.add(s)
    true = samples[int(q * len(samples))]
    assert sketch.quantile(q) == pytest.approx(true, rel=0.13)


def test_a_bucket_of_one_length_gives_that_length_not_a_point_inside_the_bucket() -> None:
    lengths = Lengths(min_runs=3)
    for limit in (1000, 2000, 4000):  # each ran to its limit
        lengths.learn(RunKey("ws", "u", "full"), limit, limit)
        lengths.learn(RunKey("ws", "u", "half"), limit / 2, limit)
    full = lengths.forecast(RunKey("ws", "u", "full"), limit=3000)
    half = lengths.forecast(RunKey("ws", "u", "half"), limit=3000)
    assert full is not None and full.likely == full.by == 3000
    assert half is not None and half.likely == pytest.approx(1500)
    assert half.by == pytest.approx(1500 * WIDER)  # the 90 % length: widened by half a bucket
    sketch = Sketch()
    for s in (100, 101, 102, 103):  # one bucket: the quantiles stay within what was seen
        sketch.add(s)
    assert 100 <= sketch.quantile(0.1) < sketch.quantile(0.9) <= 103
    assert sketch.below(99) == 0 and sketch.below(103) == 4


def test_a_running_run_is_forecast_from_the_lengths_longer_than_it_has_run() -> None:
    sketch = Sketch()
    for s in [100] * 50 + [1000] * 50:
        sketch.add(s)
    assert sketch.quantile(0.5) < 200  # half end around 100 s
    assert 800 < sketch.quantile(0.5, after=300) <= 1000  # past 300 s: the long half
    assert sketch.quantile(0.9, after=5000) == 5000  # longer than all seen: not before now


def test_the_most_specific_group_with_enough_runs_answers() -> None:
    lengths = Lengths(min_runs=3)
    key = RunKey("vision", "alice", "train-lr0.1", "python train.py")
    assert lengths.forecast(key) is None  # no history yet
    for i in range(3):
        lengths.learn(RunKey("vision", "bob", f"eval-{i}", "python eval.py"), 60)
    found = lengths.forecast(key)
    assert found is not None and found.level == "workspace" and found.runs == 3
    assert found.likely == pytest.approx(60, rel=0.13)
    for i in range(3):
        lengths.learn(RunKey("vision", "alice", f"train-lr0.{i}", "python train.py"), 3600)
    found = lengths.forecast(key)
    assert found is not None and found.level == "name" and found.runs == 3
    assert found.likely == pytest.approx(3600, rel=0.13)
    other = lengths.forecast(RunKey("nlp", "carol", "x", "y"))
    assert other is not None and other.level == "machine" and other.runs == 6


def test_a_forecast_is_capped_by_the_time_limit() -> None:
    lengths = Lengths(min_runs=1)
    lengths.learn(RunKey("ws", "u", "a"), 7200)
    found = lengths.forecast(RunKey("ws", "u", "a"), limit=600)
    assert found is not None and found.likely == found.by == 600


def test_groups_are_bounded_per_workspace_the_least_recently_fed_forgotten() -> None:
    lengths = Lengths(min_runs=1, per_workspace=4)
    for i in range(10):  # two groups (name, command) per distinct run
        lengths.learn(RunKey("ws", "u", f"job{'abcdefghij'[i]}", f"cmd{i}"), 10)
    kept = [g for g in lengths.sketches if g[0] in ("name", "command")]
    assert len(kept) == 4
    assert ("name", "ws", "u", "jobj") in kept and ("name", "ws", "u", "joba") not in kept
    assert lengths.sketches[("workspace", "ws")].total == 10  # always kept


def test_a_run_with_a_limit_is_forecast_from_the_share_of_their_limits_others_used() -> None:
    lengths = Lengths(min_runs=3)
    for limit in (1000, 2000, 4000):  # each used a quarter of its limit
        lengths.learn(RunKey("ws", "u", "job"), limit / 4, limit)
    found = lengths.forecast(RunKey("ws", "u", "job"), limit=8000)
    assert found is not None and found.likely == pytest.approx(2000, rel=0.13)
    unlimited = lengths.forecast(RunKey("ws", "u", "job"))  # from the lengths themselves
    assert unlimited is not None and unlimited.likely == pytest.approx(500, rel=0.5)
    running = lengths.forecast(RunKey("ws", "u", "job"), elapsed=4000, limit=8000)
    assert running is not None and 4000 <= running.likely <= 8000
