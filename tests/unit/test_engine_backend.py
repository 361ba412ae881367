"""The loop as a back end (runner/engine/backend.py): what the daemon and the API ask of it.

The real ``Loop`` over a real store, on the fake executor and clock of
tests/unit/engine_fakes.py.
"""

from __future__ import annotations

from pathlib import Path

from runner.engine.backend import Backend, BackendCapabilities
from tests.unit.engine_fakes import Engine


def test_the_loop_declares_a_local_back_end_that_plans_here(tmp_path: Path) -> None:
    e = Engine(tmp_path / "home")
    backend: Backend = e.loop
    assert backend.capabilities == BackendCapabilities(
        "local", "fake", local_gpus=True, plans_locally=True
    )
    assert backend.check_spec(e.loop.specs.get(e.submit("a", gpus=1)), "team") is None


def test_watch_is_told_after_a_tick_that_changed_something_only(tmp_path: Path) -> None:
    e = Engine(tmp_path / "home")
    told: list[int] = []
    e.loop.watch(lambda: told.append(e.loop.status.ticks))
    e.tick()  # the first plan
    e.submit("a", gpus=1)
    e.tick()  # planned and started
    assert told == [1, 2]
    e.tick()
    assert told == [1, 2]  # nothing changed: nobody told


def test_estimates_come_from_the_planner_replayed(tmp_path: Path) -> None:
    e = Engine(tmp_path / "home", gpus=1)
    e.submit("first", gpus=1, limit=3600)
    e.tick()
    e.submit("second", gpus=1)
    estimates = e.loop.estimates()
    assert set(estimates) == {"second"}
    starts_by = estimates["second"].starts_by
    assert starts_by is not None and starts_by >= e.clock.wall() + 3600 - 1


def test_log_files_are_the_runs_own_by_attempt_then_worker(tmp_path: Path) -> None:
    e = Engine(tmp_path / "home")
    run = e.submit("a", gpus=1)
    assert e.loop.log_files(run) == []  # nothing written yet
    folder = tmp_path / "home" / "logs" / run.run_uid
    folder.mkdir()
    for stem in ("2-0", "10-0", "1-1", "1-0"):
        (folder / f"{stem}.log").write_text(stem)
    assert [p.name for p in e.loop.log_files(run)] == ["1-0.log", "1-1.log", "2-0.log", "10-0.log"]
