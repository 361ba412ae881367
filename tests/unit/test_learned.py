"""Run lengths learned from the store's usage records (runner/engine/learned.py), on the
real loop and store with the fake executor and a clock moved by hand."""

from __future__ import annotations

from pathlib import Path

from runner.engine.learned import Learned
from runner.planner.lengths import Lengths, RunKey
from tests.unit.engine_fakes import Engine


def test_finished_runs_are_learned_once_each_and_cancelled_ones_not_at_all(
    tmp_path: Path,
) -> None:
    e = Engine(tmp_path, gpus=2)
    learned = Learned(e.store, Lengths(min_runs=2))
    for i, seconds in enumerate((100, 300)):
        e.submit(f"train-{i}", gpus=1, limit=1000)
        e.tick()
        e.tick(seconds)
        e.executor.exit(f"train-{i}", 0)
        e.tick()
    e.submit("gone", gpus=1)
    e.service.delete("gone", e.root)
    e.tick()
    assert learned.refresh() == 3  # two finished, one cancelled: read, not learned
    assert learned.refresh() == 0
    found = learned.lengths.forecast(RunKey("team", e.root.user, "train-9"), limit=1000)
    assert found is not None and found.level == "name" and found.runs == 2
    assert 100 <= found.likely <= 300 * 1.13
    assert learned.lengths.sketches[("machine",)].total == 2
