"""``--plot``: the runs waiting and the GPUs held over a replay, as SVG."""

from __future__ import annotations

import pytest

from runner.config.load import parse_config
from runner.sim.plot import WIDTH, averaged, plot_svg, steps
from runner.sim.replay import Replay, SimMachine, sim_config
from runner.sim.trace import TraceRun

CONFIG = sim_config(parse_config('[admins]\nusers = ["root"]\n'))
MACHINE = SimMachine(4, 80 * 1024**3, 64, 512 * 1024**3)
TRACE = [
    TraceRun("low", 0, 100, gpus=4, time_limit=200),
    TraceRun("high", 40, 50, gpus=4, priority=100, time_limit=60),
]


def level_at(changes: list[tuple[float, float]], t: float) -> float:
    return sum(change for at, change in changes if at <= t)


def test_a_preempted_run_waits_again_until_it_starts_again() -> None:
    done = Replay(TRACE, CONFIG, MACHINE).run()
    waiting, held = steps(done)
    assert [level_at(waiting, t) for t in (10, 39, 40, 89, 90)] == [0, 0, 1, 1, 0]
    assert [level_at(held, t) for t in (10, 60, 120, 151)] == [4, 4, 4, 0]


def test_a_step_is_averaged_over_each_slice() -> None:
    line = averaged([(0, 2), (50, -2)], 0, 100)  # 2 for the first half, then 0
    assert len(line) == WIDTH
    assert line[0] == pytest.approx(2) and line[-1] == pytest.approx(0)
    assert sum(line) / WIDTH == pytest.approx(1)


def test_the_picture_has_a_line_per_policy_in_each_panel() -> None:
    replays = [(p, Replay(TRACE, CONFIG, MACHINE, policy=p).run()) for p in ("astraeus", "fifo")]
    svg = plot_svg(replays, MACHINE.gpus)
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert svg.count("<polyline") == 4
    assert ">astraeus<" in svg and ">fifo<" in svg
