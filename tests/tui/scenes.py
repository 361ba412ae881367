"""The dashboard in the states that its snapshot tests and the screenshots (make_screenshots.py)
show, from recorded answers: draining, a held run, forecasts, sampled telemetry, a week of
usage."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

from textual.pilot import Pilot

from astraeus_tui.app import AstraeusApp
from astraeus_tui.screens.detail import RunDetailScreen
from astraeus_tui.widgets.gpu_panel import GpuPanel
from tests.tui.fake_client import FakeClient, load_fixture
from tests.tui.helpers import main_screen, screen_of, until


def draining() -> FakeClient:
    """The recorded head scenario, with the machine drained and GPU 3 drained."""
    data = copy.deepcopy(load_fixture("head"))
    at = "2026-10-01T12:30:00Z"
    data["status"]["drain"] = {
        "machine": {"reason": "kernel upgrade", "by": "root", "at": at},
        "gpus": [{"index": 3, "reason": "fan failing", "by": "root", "at": at}],
    }
    data["gpus"]["gpus"][3]["drained"] = "fan failing"
    data["status"]["head"] = None  # nothing starts: no head, every waiting run says why
    for run in data["snapshot"]:
        if run["state"] == "Queued":
            run.update(reason="Waits: the machine is draining (kernel upgrade)",
                       reason_code="DRAINING", starts_by=None, head=False)  # fmt: skip
    return FakeClient(data)


def held_queue() -> dict[str, Any]:
    """The recorded head state with sweep-lr held by alice: out of the order."""
    data = json.loads(json.dumps(load_fixture("head")))
    for run in data["snapshot"]:
        if run["name"] == "sweep-lr":
            run.update(held=True, reason="Held by alice", reason_code="HELD", position=None,
                       starts_by=None)  # fmt: skip
        elif run["name"] == "nlp-big":
            run.update(position=2)
    return data


# forecasts from learned lengths: (likely, 90 %), on the head fixture's day (now 12:00:21)
FORECASTS = {"pretrain-7b": ("12:21:00", "12:44:00"), "nlp-big": ("12:14:00", "12:52:00"),
             "sweep-lr": ("13:10:00", "16:05:00")}  # fmt: skip


def app_with_forecasts() -> AstraeusApp:
    """The recorded head state once 37 runs have finished: each waiting run has its likely
    and 90 % start; nlp-big's and sweep-lr's are later than their estimates from the
    limits."""
    data = copy.deepcopy(load_fixture("head"))
    for run in data["snapshot"]:
        if run["name"] in FORECASTS:
            likely, high = FORECASTS[run["name"]]
            run.update(likely_start=f"2026-10-01T{likely}Z", likely_start_90=f"2026-10-01T{high}Z",
                       learned_from=37)  # fmt: skip
    fake = FakeClient(data)
    return AstraeusApp(fake, clock=fake.clock)


def app_with_a_held_run() -> AstraeusApp:
    fake = FakeClient(held_queue())
    return AstraeusApp(fake, clock=fake.clock)


GIB = 1 << 30


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


def fake_with_usage() -> FakeClient:
    data = load_fixture("idle")
    data["usage"] = load_fixture("usage/week")
    return FakeClient(data)


def usage_app() -> AstraeusApp:
    """The dashboard on the recorded idle daemon, answering a week of usage."""
    fake = fake_with_usage()
    return AstraeusApp(fake, clock=fake.clock)
