"""The loop's tick and launch, on a fake executor: written first, then started; GPUs handed out.

The real ``Loop`` over a real store (tests/unit/engine_fakes.py); each ``tick`` is one
call of ``Loop.tick`` with the fake clock moved on by half a second.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.executors.base import ExecutorError, WorkerLaunch
from tests.unit.engine_fakes import Crash, Engine


@pytest.mark.parametrize(
    ("fields", "seen"),
    [
        pytest.param({"gpus": 1}, [("Starting", "Starting")], id="one-worker"),
        pytest.param({"gpus": 0}, [("Starting", "Starting")], id="cpu-only"),
        # a gang: the first worker's start marks the run Running; each row is Starting
        pytest.param(
            {"gpus": 1, "workers": 2},
            [("Starting", "Starting"), ("Running", "Starting")],
            id="gang-of-two",
        ),
    ],
)
def test_the_claim_is_written_before_the_executor_is_called(
    tmp_path: Path, fields: dict[str, Any], seen: list[tuple[str, str]]
) -> None:
    e = Engine(tmp_path / "home")
    at_start: list[tuple[str, str]] = []

    def look(launch: WorkerLaunch) -> None:  # what another reader of the store sees now
        [row] = [w for w in e.workers(launch.run) if w.worker == launch.worker]
        at_start.append((e.state(launch.run), row.state))

    e.executor.on_start = look
    e.submit("job", **fields)
    e.tick()
    assert at_start == seen
    assert e.state("job") == "Running"
    workers = e.workers("job")
    assert [w.state for w in workers] == ["Running"] * len(seen)
    assert [w.handle for w in workers] == [e.executor.handle("job", w.worker) for w in workers]
    assert e.executor.ops() == ["launch"] * len(seen)


@pytest.mark.parametrize(
    ("found", "workers", "launches"),
    [
        # the executor says it runs: adopted, not started twice
        pytest.param(True, [(1, "Running", None)], 1, id="running-adopted"),
        # no trace of it: it never started; started again, no restart spent (budget 0)
        pytest.param(
            False, [(1, "Cancelled", "never-started"), (2, "Running", None)], 2,
            id="missing-never-started",
        ),
    ],
)  # fmt: skip
def test_a_worker_claimed_just_before_a_crash_is_settled_by_what_the_executor_reports(
    tmp_path: Path, found: bool, workers: list[tuple[int, str, str | None]], launches: int
) -> None:
    e = Engine(tmp_path / "home")
    e.executor.crash_after_start = True
    e.submit("job", gpus=1, restart_limit=0)
    with pytest.raises(Crash):
        e.tick()
    assert e.state("job") == "Starting"
    [row] = e.workers("job")
    assert (row.state, row.handle) == ("Starting", None)  # its start was not noted
    e.executor.crash_after_start = False
    if not found:
        e.executor.vanish("job")
    e.tick()  # observe: what the executor says about it
    assert [(w.attempt, w.state, w.stop_reason) for w in e.workers("job")] == workers
    assert e.workers("job")[-1].handle == e.executor.handle("job")
    assert e.state("job") == "Running" and e.run("job").restarts == 0
    assert e.executor.ops() == ["launch"] * launches


Asks = list[tuple[str, int]]


@pytest.mark.parametrize(
    ("first", "ended", "then", "remaps", "expected"),
    [
        pytest.param([("a", 2)], [], [], False, {"a": ("0,1", "0,1")}, id="lowest-first"),
        pytest.param(
            [("a", 2), ("b", 2)], [], [], False,
            {"a": ("0,1", "0,1"), "b": ("2,3", "2,3")}, id="side-by-side",
        ),
        pytest.param(
            [("a", 0)], [], [], False, {"a": ("", "void")}, id="no-gpus",
        ),
        # free: 0,1 and 3. One GPU goes to the smallest free block, not the first
        pytest.param(
            [("a", 2), ("b", 1), ("c", 1)], ["a", "c"], [("d", 1), ("e", 2)], False,
            {"b": ("2", "2"), "d": ("3", "3"), "e": ("0,1", "0,1")}, id="best-fit",
        ),
        # docker with the NVIDIA runtime: the container numbers its GPUs from 0
        pytest.param(
            [("a", 1), ("b", 2)], [], [], True,
            {"a": ("0", "0"), "b": ("0,1", "1,2")}, id="remapped-by-the-runtime",
        ),
    ],
)  # fmt: skip
def test_gpu_assignment_reaches_the_executor(
    tmp_path: Path, first: Asks, ended: list[str], then: Asks, remaps: bool,
    expected: dict[str, tuple[str, str]],
) -> None:  # fmt: skip
    e = Engine(tmp_path / "home", gpus=4, remaps_gpus=remaps)
    for name, gpus in first:
        e.submit(name, gpus=gpus)
    e.tick()
    for name in ended:
        e.executor.exit(name, 0)
    for name, gpus in then:
        e.submit(name, gpus=gpus)
    e.tick()
    for name, (cuda, nvidia) in expected.items():
        launch = e.executor.launches[e.executor.handle(name)]
        assert launch.env["CUDA_VISIBLE_DEVICES"] == cuda, name
        assert launch.env["NVIDIA_VISIBLE_DEVICES"] == nvidia, name
        assert launch.env["ASTRAEUS_GPU_COUNT"] == str(len(launch.gpus))
        assert ",".join(map(str, launch.gpus)) == nvidia.replace("void", "")
        assert e.state(name) == "Running"


@pytest.mark.parametrize(
    ("first", "second", "at_once"),
    [
        pytest.param(2, 2, True, id="fits-beside"),
        pytest.param(4, 1, False, id="gpus-full"),
        pytest.param(3, 2, False, id="too-few-left"),
    ],
)
def test_a_second_run_waits_while_the_gpus_are_taken(
    tmp_path: Path, first: int, second: int, at_once: bool
) -> None:
    e = Engine(tmp_path / "home", gpus=4)
    e.submit("first", gpus=first)
    e.tick()
    e.submit("second", gpus=second)
    e.tick()
    e.tick()
    assert e.state("first") == "Running"
    if at_once:
        assert e.state("second") == "Running"
        return
    assert e.state("second") == "Queued"
    assert e.workers("second") == [] and e.executor.ops("second") == []
    assert e.reason("second") == "Next to run (priority 0): waits for running work to end"
    e.executor.exit("first", 0)
    e.tick()  # observe, settle, plan: the freed GPUs go to the waiting run at once
    assert e.state("first") == "Succeeded"
    assert e.state("second") == "Running" and e.executor.ops("second") == ["launch"]


@pytest.mark.parametrize(
    ("limit", "backfilled"),
    [
        pytest.param(600, True, id="ends-before-the-head-starts"),
        pytest.param(None, False, id="no-time-limit"),
        pytest.param(7200, False, id="ends-after-the-head-starts"),
    ],
)
def test_backfill_around_a_waiting_head(
    tmp_path: Path, limit: int | None, backfilled: bool
) -> None:
    e = Engine(tmp_path / "home", gpus=4, grace=30)
    e.submit("busy", gpus=2, limit=3600)
    e.tick()
    e.submit("big", gpus=4)  # the head: waits for busy, by its limit and grace
    e.submit("small", gpus=1, limit=limit)
    e.tick()
    assert e.state("big") == "Queued" and e.executor.ops("big") == []
    if not backfilled:
        assert e.state("small") == "Queued" and e.executor.ops("small") == []
        assert e.reason("small").startswith("Queued behind big, which starts by ")
        return
    assert e.state("small") == "Running" and e.executor.ops("small") == ["launch"]
    [started] = [m for m in e.events("small") if m.startswith("Backfilled")]
    assert started.startswith("Backfilled: attempt 1, worker(s) 0, GPUs 2: ")
    assert ": its time limit ends it before big starts (by " in started


@pytest.mark.parametrize(
    ("engine_down", "after", "state", "reason"),
    [
        # the executor refuses the worker: the run fails, no restart helps
        pytest.param(
            False, [(1, "Failed", "image nope: not found")], "Failed",
            "Could not start worker 0: image nope: not found", id="refused",
        ),
        # the engine went away while starting it: not the run's fault; once it answers,
        # the worker is found never started and started again, no restart spent
        pytest.param(
            True, [(1, "Cancelled", "never started (the daemon stopped before starting it)"),
                   (2, "Running", None)],
            "Running", "", id="engine-went-down",
        ),
    ],
)  # fmt: skip
def test_a_start_the_executor_refuses(
    tmp_path: Path, engine_down: bool, after: list[tuple[int, str, str | None]], state: str,
    reason: str,
) -> None:  # fmt: skip
    e = Engine(tmp_path / "home")
    e.executor.refuse_start = "image nope: not found"

    def went_down(launch: WorkerLaunch) -> None:
        e.executor.up = not engine_down

    e.executor.on_start = went_down
    e.submit("job", gpus=1, restart_limit=3)
    e.tick()
    e.executor.refuse_start = None
    e.tick()
    e.tick()
    if engine_down:
        assert e.worker_states("job") == [(1, "Starting")] and e.state("job") == "Starting"
        e.executor.up = True
        e.tick()
    assert [(w.attempt, w.state, w.error) for w in e.workers("job")] == after
    assert (e.state("job"), e.reason("job"), e.run("job").restarts) == (state, reason, 0)
    assert e.executor.ops() == ["refused"] + ["launch"] * (len(after) - 1)


def test_while_the_engine_does_not_answer_nothing_is_observed_or_started(
    tmp_path: Path,
) -> None:
    e = Engine(tmp_path / "home")
    e.submit("running", gpus=1)
    e.tick()
    e.executor.up = False
    e.executor.vanish("running")  # unseen while the engine is down
    e.submit("waiting", gpus=1)
    for _ in range(3):
        e.tick(20)
    assert (e.state("running"), e.state("waiting")) == ("Running", "Queued")
    assert e.executor.ops() == ["launch"]
    assert e.loop.status.errors == ["the fake engine does not answer: waiting for it"]  # once
    e.executor.up = True
    e.tick()  # the lost worker restarts (budget 10); the waiting run starts
    assert e.run("running").restarts == 1 and e.worker_states("running")[0] == (1, "Failed")
    assert (e.state("running"), e.state("waiting")) == ("Running", "Running")
    assert sorted(e.executor.ops()) == ["cleanup", "launch", "launch", "launch"]


def test_an_engine_gone_before_the_first_reconcile_is_waited_for(tmp_path: Path) -> None:
    """The daemon connected, then the engine stopped before the loop's first reconcile:
    the outage is said once (as a tick says it), never a failed tick a round; once the
    engine answers the loop reconciles and plans."""
    e = Engine(tmp_path / "home")  # reconciled once, as a daemon that started
    e.submit("patient", gpus=1)
    e.executor.up = False
    for _ in range(3):
        assert e.loop.try_reconcile() is False
    assert e.loop.status.errors == ["the fake engine does not answer: waiting for it"]
    assert e.executor.ops() == [] and e.state("patient") == "Queued"
    e.executor.up = True
    assert e.loop.try_reconcile() is True
    e.tick()
    assert e.state("patient") == "Running" and e.executor.ops() == ["launch"]
    assert e.loop.status.errors == ["the fake engine does not answer: waiting for it"]


def test_a_reconcile_that_fails_while_the_engine_answers_is_an_error(tmp_path: Path) -> None:
    e = Engine(tmp_path / "home")

    def broken() -> list[Any]:
        raise ExecutorError("fake: cannot list workers: permission denied")

    e.executor.list_workers = broken  # type: ignore[method-assign]
    with pytest.raises(ExecutorError, match="permission denied"):
        e.loop.try_reconcile()
    assert e.loop.status.errors == []
