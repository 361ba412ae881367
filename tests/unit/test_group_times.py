"""A run's usage record has its wait also when the tick that started it read its clock
before the submit committed (the start a moment "before" the submit): 0 s, not unknown;
and a group's runs are submitted at the loop's clock of the tick that makes them. The real
loop, store, service and group control, a fake executor and a clock moved by hand
(tests/unit/engine_fakes.py)."""

from __future__ import annotations

import time
from pathlib import Path

from runner.engine.groups import GroupControl
from runner.service.groups import GroupService
from tests.support.harness import spec
from tests.unit.engine_fakes import PROGRAM, Engine


def test_a_run_started_by_a_tick_that_read_its_clock_before_the_submit_waited_zero(
    tmp_path: Path,
) -> None:
    e = Engine(tmp_path / "home")
    e.submit("quick", gpus=1)
    e.clock.step_wall(-2.0)  # the tick's reading is from before the submit
    e.tick()
    assert e.run("quick").started_at is not None
    assert e.run("quick").started_at < e.run("quick").submitted_at  # type: ignore[operator]
    e.executor.exit("quick", 0)
    e.tick()
    (record,) = e.store.usage.records(0)
    assert record.run == "quick" and record.wait_seconds == 0.0


def test_replicas_made_by_the_api_and_by_a_tick_have_their_waits(tmp_path: Path) -> None:
    e = Engine(tmp_path / "home")
    e.clock.step_wall(time.time() - 3600 - e.clock.wall())  # an hour behind the machine's clock
    groups = GroupService(e.service)
    e.loop.groups = GroupControl(e.store, groups).tick
    template = spec("pool", PROGRAM, gpus=1, workspace="team")
    groups.create({"kind": "replicas", "name": "pool", "template": template, "replicas": 1},
                  e.root)  # fmt: skip  # its first life made now, on the machine's clock
    e.tick()
    assert e.state("pool-0") == "Running"
    e.executor.exit("pool-0", 0)
    e.tick()  # the first life ends
    e.tick(30)  # ... and, its back-off passed, the next starts
    assert e.state("pool-0") == "Running" and e.run("pool-0").started_at == e.clock.wall()
    e.executor.exit("pool-0", 0)
    groups.scale("pool", 2, e.root)
    e.tick()  # a replica the tick makes is submitted at the tick's clock, and starts in it
    assert e.run("pool-1").submitted_at == e.run("pool-1").started_at == e.clock.wall()
    first, second = e.store.usage.records(0)
    assert first.wait_seconds == 0.0  # made by the API on the machine's clock
    assert first.finished_at is not None and second.started_at is not None
    assert second.wait_seconds == second.started_at - first.finished_at > 0
