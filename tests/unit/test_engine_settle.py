"""Settle, on a fake executor: what a run becomes when its worker exits, vanishes or runs
past its time limit (measured on the monotonic clock, the fake one moved by hand)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.engine.loop import KILL_AGAIN
from tests.unit.engine_fakes import Engine

VANISH = "vanish"  # the executor has no trace of the worker any more

Ends = list[int | str]


@pytest.mark.parametrize(
    ("budget", "ends", "state", "workers", "reason"),
    [
        pytest.param(0, [0], "Succeeded", ["Done"], "", id="exit-0"),
        pytest.param(
            0, [3], "Failed", ["Failed"],
            "Failed: worker 0 exited with code 3; the restart budget (0) is spent",
            id="non-zero-no-budget",
        ),
        pytest.param(2, [1, 0], "Succeeded", ["Failed", "Done"], "", id="restart-then-exit-0"),
        pytest.param(
            1, [1, 2], "Failed", ["Failed", "Failed"],
            "Failed: worker 0 exited with code 2; the restart budget (1) is spent",
            id="budget-spent",
        ),
        pytest.param(
            0, [VANISH], "Failed", ["Failed"],
            "Failed: worker 0 the worker is gone (lost); the restart budget (0) is spent",
            id="vanished-no-budget",
        ),
        pytest.param(1, [VANISH, 0], "Succeeded", ["Failed", "Done"], "", id="vanished-restarts"),
    ],
)  # fmt: skip
def test_a_worker_end_settles_the_run(
    tmp_path: Path, budget: int, ends: Ends, state: str, workers: list[str], reason: str
) -> None:
    e = Engine(tmp_path / "home")
    e.submit("job", gpus=1, restart_limit=budget)
    e.tick()
    for attempt, end in enumerate(ends, start=1):
        assert e.state("job") == "Running" and e.run("job").attempts == attempt
        if end == VANISH:
            e.executor.vanish("job")
        else:
            assert isinstance(end, int)
            e.executor.exit("job", end)
        e.tick()  # observe, settle, and plan again: a restart starts in the same tick
    run = e.run("job")
    assert run.state == state
    assert e.reason("job") == reason
    assert [s for _, s in e.worker_states("job")] == workers
    assert (run.attempts, run.restarts) == (len(ends), len(ends) - 1)
    assert run.finished_at == e.clock.wall()
    last = ends[-1]
    assert run.exit_code == (None if last == VANISH else last)
    assert e.executor.ops().count("launch") == len(ends)
    if ends[0] == VANISH:
        first = e.workers("job")[0]
        assert first.error == "the worker is gone (lost)" and first.exit_code is None
    restarts = [m for m in e.events("job") if m.startswith("Restarting (")]
    assert len(restarts) == len(ends) - 1
    if restarts:
        what = "the worker is gone (lost)" if ends[0] == VANISH else f"exited with code {ends[0]}"
        assert restarts[0] == f"Restarting (restart 1 of {budget}): worker 0 {what}"


@pytest.mark.parametrize(
    ("gang", "after"),
    [
        # the rest of the gang is stopped (SIGTERM, next tick), then it starts again whole
        pytest.param(
            True,
            [(1, 0, "Cancelled", "restart"), (1, 1, "Failed", None), (2, 0, "Running", None),
             (2, 1, "Running", None)],
            id="gang-restarts-whole",
        ),
        # independent workers: only the failed one starts again, its sibling runs on
        pytest.param(
            False,
            [(1, 0, "Running", None), (1, 1, "Failed", None), (2, 1, "Running", None)],
            id="independent-restarts-alone",
        ),
    ],
)  # fmt: skip
def test_a_failed_worker_of_two_restarts_as_its_run_is_made(
    tmp_path: Path, gang: bool, after: list[tuple[int, int, str, str | None]]
) -> None:
    e = Engine(tmp_path / "home")
    e.submit("pair", gpus=1, workers=2, gang=gang, restart_limit=1)
    e.tick()
    e.executor.exit("pair", 1, worker=1)
    e.tick()  # settled: the restart is decided
    assert e.reason("pair") == ("Restarting (restart 1 of 1): worker 1 exited with code 1"
                                if gang else "")  # fmt: skip
    e.tick()  # enforce: a gang's other worker is stopped
    if gang:
        assert [c.op for c in e.executor.calls if c.worker == 0] == ["launch", "stop"]
        e.executor.exit("pair", 143, worker=0)
        e.tick()
    else:
        assert [c.op for c in e.executor.calls if c.worker == 0] == ["launch"]
    assert [(w.attempt, w.worker, w.state, w.stop_reason) for w in e.workers("pair")] == after
    run = e.run("pair")
    assert (run.state, run.restarts) == ("Running", 1)


@pytest.mark.parametrize(
    ("limit", "grace", "exits_on_term"),
    [
        pytest.param(60, 30, True, id="exits-on-sigterm"),
        pytest.param(60, 30, False, id="ignores-sigterm"),
        pytest.param(3600, 5, False, id="long-limit-short-grace"),
    ],
)
def test_a_time_limit_on_the_monotonic_clock_stops_then_kills(
    tmp_path: Path, limit: int, grace: float, exits_on_term: bool
) -> None:
    e = Engine(tmp_path / "home", grace=grace)
    e.submit("job", gpus=1, limit=limit)
    e.tick()
    e.tick(limit - 0.5)
    assert e.state("job") == "Running" and e.executor.ops() == ["launch"]
    e.tick(0.5)  # the limit is reached
    assert e.state("job") == "Stopping"
    assert e.reason("job") == "Time limit reached: stopping"
    [w] = e.workers("job")
    assert (w.state, w.stop_reason) == ("Stopping", "timelimit")
    assert e.executor.ops() == ["launch", "stop"]
    if exits_on_term:
        e.executor.exit("job", 143)
        e.tick()
        expected = ["launch", "stop", "cleanup"]
    else:
        e.tick(grace - 1)
        assert e.executor.ops() == ["launch", "stop"]  # within the grace: no SIGKILL
        e.tick(1)
        assert e.executor.ops() == ["launch", "stop", "kill"]
        assert e.events("job")[-1].startswith(
            f"Sent SIGKILL to worker 0: the program did not exit within the {grace:g} s stop"
        )
        assert e.state("job") == "Stopping"  # until the executor says it ended
        e.executor.exit("job", 137)
        e.tick()
        expected = ["launch", "stop", "kill", "cleanup"]
    assert e.state("job") == "Failed" and e.reason("job") == "Time limit reached"
    assert e.events("job")[-1] == "Time limit reached: stopped"
    assert e.executor.ops() == expected


def test_a_sigkill_that_did_not_end_the_worker_is_sent_again(tmp_path: Path) -> None:
    e = Engine(tmp_path / "home", grace=10)
    e.submit("job", gpus=1)
    e.tick()
    e.service.delete("job", e.root)
    e.tick()
    e.tick(10)
    assert e.executor.ops() == ["launch", "stop", "kill"]
    e.tick(KILL_AGAIN - 0.5)
    assert e.executor.ops() == ["launch", "stop", "kill"]
    e.tick(0.5)  # the first one was lost (a crash, an outage): again
    assert e.executor.ops() == ["launch", "stop", "kill", "kill"]
    assert len([m for m in e.events("job") if m.startswith("Sent SIGKILL")]) == 1
    e.executor.exit("job", 137)
    e.tick()
    assert e.state("job") == "Cancelled"
    assert e.events("job")[-1] == "Deleted: stopped and cancelled"
