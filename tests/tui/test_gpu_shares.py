"""The GPU panel's shared GPUs: ``shared · 30G free``, then one line per run, bounded."""

from __future__ import annotations

import asyncio

from textual.app import App, ComposeResult

from astraeus_tui.widgets.gpu_panel import GpuPanel, gpu_row, share_lines
from runner.model import WorkerState
from runner.schema import (
    Gpu,
    GpuHolder,
    GpuList,
    GpuShare,
    Telemetry,
    TelemetryGpu,
    TelemetryGpuSample,
)
from tests.tui.helpers import plain

SPARK_BARS = set("▁▂▃▄▅▆▇█")

GiB = 1 << 30


def _shared(*runs: tuple[str, int]) -> Gpu:
    return Gpu(index=2, simulated=True, memory_total=80 * GiB,
               shares=[GpuShare(run=r, worker=0, bytes=n * GiB) for r, n in runs])  # fmt: skip


def test_a_shared_gpu_says_what_is_free_and_lists_each_run_under_it() -> None:
    gpu = _shared(("eval-a", 20), ("another namespace's run", 30))
    assert gpu_row(gpu)[-1].plain == "shared · 30G free"
    assert [t.plain for t in share_lines(gpu)] == [
        "  eval-a 20G",
        "  another namespace's run 30G",
    ]


def test_many_shares_are_bounded_with_a_count_of_the_rest() -> None:
    gpu = _shared(*((f"r{i}", 5) for i in range(7)))
    lines = [t.plain for t in share_lines(gpu)]
    assert lines == ["  r0 5G", "  r1 5G", "  +5 more"]
    assert [t.plain for t in share_lines(_shared(("a", 1), ("b", 1), ("c", 1)))] == [
        "  a 1G", "  b 1G", "  c 1G",
    ]  # fmt: skip


def test_a_whole_gpu_row_is_unchanged_and_has_no_lines_under_it() -> None:
    gpu = Gpu(
        index=0,
        simulated=True,
        memory_total=80 * GiB,
        holder=GpuHolder(run="train", worker=0, state=WorkerState.RUNNING),
    )
    assert gpu_row(gpu)[-1].plain == "train" and share_lines(gpu) == []


class _Narrow(App[None]):
    """The GPU panel alone, as narrow as beside the timeline at 160 columns."""

    CSS = "GpuPanel { width: 40; }"

    def compose(self) -> ComposeResult:
        yield GpuPanel()


def _telemetry() -> Telemetry:
    history = [TelemetryGpuSample(time=float(k), utilization=90, memory_used=40 * GiB)
               for k in range(60)]  # fmt: skip
    return Telemetry(gpus=[TelemetryGpu(index=2, utilization=90, memory_used=40 * GiB,
                                        memory_total=80 * GiB, history=history)])  # fmt: skip


def test_beside_sparklines_each_share_has_the_panels_width_and_what_is_free_stays() -> None:
    async def drive() -> str:
        app = _Narrow()
        async with app.run_test(size=(60, 12)) as pilot:
            panel = app.query_one(GpuPanel)
            gpus = [_shared(("eval-a", 20), ("eval-b", 30), ("notebook", 10), ("probe", 8))]
            panel.gpus, panel.telemetry = GpuList(gpus=gpus, simulated=True), _telemetry()
            await pilot.pause()
            return plain(panel)

    lines = [line.rstrip() for line in asyncio.run(drive()).splitlines()]
    assert any(SPARK_BARS & set(line) for line in lines)  # the sparklines are there
    (row,) = [line for line in lines if line.startswith("2 ")]
    assert row.endswith("12G free")  # the holder column is narrow: what is free is kept
    under = lines[lines.index(row) + 1 :]
    assert [line.strip() for line in under[:3]] == ["eval-a 20G", "eval-b 30G", "+2 more"]
