"""Telemetry in the dashboard: sparklines of each GPU's utilisation and memory in the GPU
panel, and the run page's plot of a run's use over its life; from a real daemon on
simulated GPUs, and as pictures from fixed answers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Sparkline, Static

from astraeus_tui.app import AstraeusApp
from astraeus_tui.client import Client
from astraeus_tui.screens.detail import PLOT_POINTS, PLOTS, RunDetailScreen, reduced
from astraeus_tui.screens.main import MainScreen
from astraeus_tui.widgets.gpu_panel import SPARK_POINTS, GpuPanel
from tests.support.harness import spec, worker
from tests.support.served import Served
from tests.tui.fake_client import FakeClient
from tests.tui.helpers import drive, highlight, main_screen, plain, screen_of, until
from tests.tui.scenes import on_the_run_page, sampled_app, sparklines_drawn

SPARK_BARS = set("▁▂▃▄▅▆▇█")


# ------------------------------------------------------------------ fixed answers


def test_the_gpu_panel_draws_a_sparkline_per_gpu_from_the_telemetry() -> None:
    async def main() -> None:
        app = sampled_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await sparklines_drawn(pilot)
            shown = plain(app.screen.query_one(GpuPanel)).splitlines()
            rows = [line for line in shown if line.strip()[:1].isdigit()]
            assert len(rows) == 4
            for line in rows[:3]:  # held: busy, its readings beside the lines
                assert sum(c in SPARK_BARS for c in line) >= 10 and "%" in line, line
                assert "sim" not in line
            assert "▁▁▁▁▁▁   0%" in rows[3]  # idle: flat, at 0 %

    asyncio.run(main())


def test_without_telemetry_the_panel_is_as_before() -> None:
    async def main() -> None:
        fake = FakeClient("head")
        app = AstraeusApp(fake, clock=fake.clock)
        async with app.run_test(size=(120, 36)) as pilot:
            await main_screen(pilot)
            await pilot.pause()
            assert ("telemetry", "5m") in fake.calls
            shown = plain(app.screen.query_one(GpuPanel))
            assert "sim" in shown and not SPARK_BARS & set(shown)

    asyncio.run(main())


def test_the_run_page_plots_its_use_bounded() -> None:
    async def main() -> None:
        app = sampled_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await on_the_run_page(pilot)
            detail = app.screen
            for plot_id, _, _, _ in PLOTS:
                data = detail.query_one(f"#{plot_id}", Sparkline).data
                assert data is not None and 2 <= len(data) <= PLOT_POINTS
            value = detail.query_one("#plot-gpu-value", Static)
            assert "93%" in str(value.render()) and "peak 99%" in str(value.render())

    asyncio.run(main())


def test_a_plot_keeps_a_bounded_number_of_points() -> None:
    values = [float(i % 10) for i in range(10_000)]
    kept = reduced(values)
    assert len(kept) == PLOT_POINTS and abs(sum(kept) / len(kept) - 4.5) < 0.1
    assert reduced([1.0, 2.0]) == [1.0, 2.0]
    assert SPARK_POINTS <= 60


def test_the_gpu_panel_with_sparklines(snap_compare: Any) -> None:
    assert snap_compare(sampled_app(), terminal_size=(120, 36), run_before=sparklines_drawn)


def test_the_run_page_with_its_plot(snap_compare: Any) -> None:
    assert snap_compare(sampled_app(), terminal_size=(120, 36), run_before=on_the_run_page)


# ------------------------------------------------------------------ a real daemon


def test_a_running_run_draws_sparklines_and_its_page_plots_it(
    served: Callable[..., Served],
) -> None:
    async def scenario(pilot: Pilot[Any], screen: MainScreen, client: Client) -> None:
        panel = screen.query_one(GpuPanel)

        def drawn() -> bool:
            t = panel.telemetry
            return t is not None and any(
                isinstance(g.history, list) and len(g.history) >= 2 and g.utilization
                for g in t.gpus
            )

        await until(pilot, drawn, 30, "sparklines of a busy GPU")
        await pilot.pause()
        assert sum(c in SPARK_BARS for c in plain(panel)) >= 4 * 6
        await highlight(pilot, screen, "busy")
        await pilot.press("enter")
        detail = await screen_of(pilot, RunDetailScreen)
        await until(pilot, lambda: detail.plotted, 30, "the run page's plot")
        data = detail.query_one("#plot-gpu", Sparkline).data
        assert data and max(data) >= 80  # a simulated GPU its run works on is 80-100 % busy

    drive(served, scenario, spec("busy", worker(), gpus=1), machine="telemetry_seconds = 0.3")
