"""Telemetry in the dashboard: sparklines of each GPU's utilisation and memory in the GPU
panel, and the run page's plot of a run's use over its life; from a real daemon on
simulated GPUs, and as pictures from fixed answers."""

from __future__ import annotations

import asyncio
import math
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
from tests.tui.fake_client import FakeClient, load_fixture
from tests.tui.helpers import drive, highlight, main_screen, plain, screen_of, until

GIB = 1 << 30
SPARK_BARS = set("▁▂▃▄▅▆▇█")


def _wave(k: int, phase: float, low: float, high: float) -> float:
    return low + (high - low) * (0.5 + 0.5 * math.sin(k / 5 + phase))


def telemetry_answer(now: float, held: dict[int, str]) -> dict[str, Any]:
    """``GET /v1/telemetry?history=5m`` for the head fixture's four simulated GPUs."""
    gpus = []
    for i in range(4):
        busy = i in held
        history = [
            {"time": now - 5 * (60 - k),
             "utilization": round(_wave(k, i, 70, 100)) if busy else 0,
             "memory_used": round(_wave(k, i + 1, 40, 70) * GIB) if busy else 0,
             "temperature": 75 if busy else 34, "power_watts": 300.0 if busy else 62.0}
            for k in range(61)
        ]  # fmt: skip
        last = history[-1]
        gpus.append({
            "index": i, "uuid": f"SIM-GPU-{i}", "name": "Simulated GPU", "simulated": True,
            "utilization": last["utilization"], "memory_used": last["memory_used"],
            "memory_total": 80 * GIB, "temperature": last["temperature"],
            "power_watts": last["power_watts"], "history": history,
        })  # fmt: skip
    return {"time": "2026-10-01T12:40:21Z", "interval_seconds": 5.0, "simulated": True,
            "gpus": gpus, "runs": []}  # fmt: skip


def run_telemetry_answer(now: float, name: str) -> dict[str, Any]:
    """``GET /v1/runs/{name}/telemetry``: 40 minutes of a run warming up, then steady."""
    history = [
        {"time": now - 2400 + 10 * k,
         "cpu_percent": round(min(100.0, 20 + k) + 10 * math.sin(k / 7), 1),
         "memory_bytes": round(min(12.0, 2 + k / 12) * GIB),
         "gpu_memory_bytes": round(min(140.0, 30 + k * 1.5) * GIB),
         "gpu_util": round(_wave(k, 0, 60, 99), 1)}
        for k in range(241)
    ]  # fmt: skip
    figures = {"cpu_percent": 101.2, "memory_bytes": 12 * GIB,
               "gpu_memory_bytes": 140 * GIB, "gpu_util": 93.0}  # fmt: skip
    return {
        "uid": "3f9c" * 8, "name": name, "workspace": "vision", "interval_seconds": 5.0,
        "usage": {"samples": 241, "since": "2026-10-01T12:00:20Z",
                  "until": "2026-10-01T12:40:20Z", "now": figures,
                  "mean": {"cpu_percent": 88.4, "memory_bytes": 9 * GIB,
                           "gpu_memory_bytes": 118 * GIB, "gpu_util": 81.5},
                  "peak": {"cpu_percent": 110.0, "memory_bytes": 12 * GIB,
                           "gpu_memory_bytes": 140 * GIB, "gpu_util": 99.0}},
        "history": history,
    }  # fmt: skip


def sampled_fake() -> FakeClient:
    data = load_fixture("head")
    now = float(data["now"])
    data["telemetry"] = telemetry_answer(now, {0: "eval-nightly", 1: "eval-nightly",
                                               2: "ft-lowprio"})  # fmt: skip
    data["run_telemetry"] = {"eval-nightly": run_telemetry_answer(now, "eval-nightly")}
    return FakeClient(data)


def sampled_app() -> AstraeusApp:
    fake = sampled_fake()
    return AstraeusApp(fake, clock=fake.clock)


async def sparklines_drawn(pilot: Pilot[Any]) -> None:
    screen = await main_screen(pilot)
    panel = screen.query_one(GpuPanel)
    await until(pilot, lambda: panel.telemetry is not None, message="the telemetry")
    await pilot.pause()


async def on_the_run_page(pilot: Pilot[Any]) -> None:
    await main_screen(pilot)
    app = pilot.app
    assert isinstance(app, AstraeusApp)
    fake = app.client
    await app.push_screen(RunDetailScreen(fake, app.clock, "eval-nightly"))
    detail = await screen_of(pilot, RunDetailScreen)
    await until(pilot, lambda: detail.plotted and detail.run is not None, message="the plot")
    await pilot.pause()


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
