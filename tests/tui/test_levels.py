"""Sparklines on a fixed scale: noise between 85 and 95 % stays near the top, not 0–100."""

from __future__ import annotations

from rich.color import Color
from rich.console import Console
from textual.renderables.sparkline import Sparkline

from astraeus_tui.screens.detail import plot_top
from astraeus_tui.widgets.gpu_panel import trend_cells
from astraeus_tui.widgets.levels import Levels
from runner.model import RunState
from runner.schema import (
    Run,
    RunTelemetry,
    RunUsage,
    TelemetryGpu,
    TelemetryGpuSample,
    TelemetryRunSample,
    UsageFigures,
)

GREEN, RED = Color.parse("#2e6b2e"), Color.parse("#5fff5f")


def bars(renderable: object, width: int = 40) -> str:
    console = Console(width=width, color_system=None, legacy_windows=False)
    with console.capture() as captured:
        console.print(renderable, end="")
    return captured.get()


def test_noise_near_the_top_is_drawn_near_the_top() -> None:
    noise = [85.0, 95.0, 88.0, 92.0, 86.0, 94.0]
    drawn = bars(Levels(noise, top=100, width=6, low=GREEN, high=RED))
    assert drawn == "▆▇▇▇▇▇"
    own = Sparkline(noise, width=6, min_color=GREEN, max_color=RED)  # its own min and max
    assert bars(own) == "▁█▃▅▁▇"
    assert bars(Levels([0.0, 50.0, 100.0], top=100, width=3, low=GREEN, high=RED)) == "▁▄█"


def test_levels_past_the_top_or_below_zero_are_held_in() -> None:
    drawn = bars(Levels([-5.0, 250.0], top=100, width=2, low=GREEN, high=RED))
    assert drawn == "▁█"
    assert bars(Levels([3.0, 4.0], top=0, width=2, low=GREEN, high=RED)) == "▁▁"
    assert bars(Levels([], top=100, width=4, low=GREEN, high=RED)) == "▁▁▁▁"


def test_more_samples_than_cells_keep_each_cells_highest() -> None:
    data = [10.0, 100.0, 10.0, 10.0]
    assert bars(Levels(data, top=100, width=2, low=GREEN, high=RED)) == "█▁"


def test_the_gpu_panel_draws_util_on_0_100_and_memory_on_the_gpus_total() -> None:
    gib = 1 << 30
    history = [
        TelemetryGpuSample(time=float(i), utilization=u, memory_used=m * gib)
        for i, (u, m) in enumerate([(85, 40), (95, 41), (88, 40), (92, 41), (86, 40), (94, 41)])
    ]
    gpu = TelemetryGpu(index=0, utilization=94, memory_used=41 * gib, memory_total=80 * gib,
                       history=history)  # fmt: skip
    cells = trend_cells(gpu)
    assert cells is not None
    util, memory = (bars(c, 20).split(" ", 1)[0] for c in cells)
    assert util == "▆▇▇▇▇▇"
    assert set(memory) == {"▄"}  # about half of 80 GiB, steady: not ▁ to █


def test_the_run_pages_plots_have_fixed_scales() -> None:
    samples = [TelemetryRunSample(time=1.0, cpu_percent=90.0, memory_bytes=3, gpu_util=50.0,
                                  gpu_memory_bytes=7)]  # fmt: skip
    peak = UsageFigures(cpu_percent=120.0, memory_bytes=5, gpu_util=60.0, gpu_memory_bytes=8)
    t = RunTelemetry(uid="u", name="r", workspace="w", usage=RunUsage(peak=peak), history=samples)
    run = Run(id="r", name="r", workspace="w", state=RunState.RUNNING, cpu_cores_requested=4,
              memory_requested=4)  # fmt: skip
    assert plot_top(t, "gpu_util", run) == 100.0
    assert plot_top(t, "cpu_percent", run) == 400.0  # four cores asked
    assert plot_top(t, "memory_bytes", run) == 5.0  # past what it asked: its peak
    assert plot_top(t, "gpu_memory_bytes", run) == 8.0
    assert plot_top(t, "cpu_percent", None) == 120.0
