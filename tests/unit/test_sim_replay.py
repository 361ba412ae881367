"""The replay: the daemon's loop, store and service on a virtual clock, with the virtual
executor; what it measures of each run."""

from __future__ import annotations

import pytest

from runner.config.load import parse_config
from runner.sim.replay import Replay, SimDrain, SimMachine, sim_config
from runner.sim.report import Outcome
from runner.sim.trace import TraceRun, parse_seconds

GIB = 1024**3
MACHINE = SimMachine(4, 80 * GIB, 64, 512 * GIB)
CONFIG = sim_config(parse_config('[admins]\nusers = ["root"]\n[machine]\nstop_grace_seconds = 30'))


def replay(runs: list[TraceRun], **kwargs: object) -> dict[str, Outcome]:
    done = Replay(runs, CONFIG, MACHINE, **kwargs).run()  # type: ignore[arg-type]
    return {o.name: o for o in done.outcomes}


def preempted() -> list[TraceRun]:
    """``low`` holds every GPU for 100 s; ``high`` (priority 100) comes at 40 s for 50 s."""
    return [
        TraceRun("low", 0, 100, gpus=4, time_limit=200),
        TraceRun("high", 40, 50, gpus=4, priority=100, time_limit=60),
    ]


def test_a_preempted_run_resumes_from_its_checkpoint() -> None:
    out = replay(preempted(), resume=True)
    assert out["high"].start == 40 and out["high"].end == 90
    assert out["low"].starts == (0, 90) and out["low"].preemptions == 1
    assert out["low"].end == 150  # 60 s left after 40 s of work
    assert out["low"].held == pytest.approx(4 * 100) and out["low"].lost == 0


def test_without_a_checkpoint_a_preempted_run_starts_over_and_its_work_is_lost() -> None:
    out = replay(preempted(), resume=False)
    assert out["low"].end == 190  # all 100 s again from 90
    assert out["low"].held == pytest.approx(4 * 140)
    assert out["low"].lost == pytest.approx(4 * 40)


def test_a_baseline_never_preempts() -> None:
    for policy in ("fifo", "greedy", "easy"):
        out = replay(preempted(), policy=policy)
        assert out["high"].start == 100, policy
        assert out["low"].preemptions == 0, policy


def test_a_run_past_its_time_limit_is_stopped_there() -> None:
    out = replay([TraceRun("long", 5, 500, gpus=1, time_limit=60)])
    assert out["long"].state == "Failed"
    assert out["long"].end == 65
    assert out["long"].held == pytest.approx(60)


def test_a_shared_run_holds_its_fraction_of_a_gpu() -> None:
    runs = [TraceRun(f"s{i}", 0, 100, gpus=1, gpu_memory=20 * GIB) for i in range(8)]
    out = replay(runs)
    assert all(
        o.start == 0 for o in out.values()
    )  # eight quarter-GPU asks fit on four GPUs at once
    assert sum(o.held for o in out.values()) == pytest.approx(8 * 0.25 * 100)


def test_estimates_with_exact_limits_are_kept_and_later_work_is_told_apart() -> None:
    queue = [TraceRun(f"q{i}", i, 100, gpus=4, time_limit=100) for i in range(4)]
    out = replay(queue, estimate_every=10.0)
    assert sum(o.estimates for o in out.values()) > 0
    assert sum(o.promises for o in out.values()) > 0  # made while the run was the head
    assert sum(o.late for o in out.values()) == sum(o.broken for o in out.values()) == 0
    assert sum(o.overtaken for o in out.values()) == 0
    jumped = [*queue, TraceRun("urgent", 150, 100, gpus=4, priority=100, time_limit=100)]
    out = replay(jumped, estimate_every=10.0)
    assert sum(o.late for o in out.values()) == 0
    assert sum(o.overtaken for o in out.values()) > 0  # urgent went before q2 and q3


def test_a_run_the_service_refuses_is_reported_and_the_rest_replayed() -> None:
    done = Replay(
        [TraceRun("bad", 0, 10, gpus=1, workspace="nowhere"), TraceRun("ok", 0, 10, gpus=1)],
        CONFIG,
        MACHINE,
    ).run()
    assert "no workspace nowhere" in done.refused["bad"]
    assert [o.name for o in done.outcomes] == ["ok"]


def test_a_replay_is_the_same_each_time() -> None:
    runs = [
        TraceRun(f"r{i}", i * 7 % 50, 30 + i * 13 % 90, gpus=1 + i % 4, priority=i % 3 * 50,
                 time_limit=200)
        for i in range(30)
    ]  # fmt: skip
    assert replay(runs) == replay(runs)


def test_a_drain_starts_nothing_new_until_it_ends() -> None:
    runs = [TraceRun("first", 0, 50, gpus=1), TraceRun("second", 10, 50, gpus=1)]
    out = replay(runs, drains=[SimDrain(5, 100)])
    assert out["first"].start == 0  # running work finishes
    assert out["second"].start == 100
    gpus = [TraceRun("three", 10, 50, gpus=3), TraceRun("one", 11, 50, gpus=1)]
    out = replay(gpus, drains=[SimDrain(0, 500, (0, 1))])  # two of four GPUs left
    assert out["three"].start == 500 and out["one"].start == 11


def test_a_drain_is_read_as_an_admin_types_it() -> None:
    assert SimDrain.parse("10d+12h:0,1", parse_seconds) == SimDrain(864000, 907200, (0, 1))
    assert SimDrain.parse("90+30", parse_seconds) == SimDrain(90, 120)
    for bad in ("10d", "10d+0", "x+1h", "1h+1h:a"):
        with pytest.raises(ValueError, match="START\\+LENGTH"):
            SimDrain.parse(bad, parse_seconds)
    with pytest.raises(ValueError, match="no GPU 4"):
        Replay([], CONFIG, MACHINE, drains=[SimDrain(0, 1, (4,))])
