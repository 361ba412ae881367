"""Draw the README's pictures of the dashboard: ``make screenshots``.

The same apps as the snapshot tests (recorded daemon answers, frozen clock),
saved to ``screenshots/`` as SVG, then PNG with ``rsvg-convert`` (Debian:
``apt-get install librsvg2-bin``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

from astraeus_tui.app import AstraeusApp
from astraeus_tui.widgets.usage_panel import UsagePanel
from tests.tui.helpers import PROJECT, STATES, app_for, new_run_filled, settled, until
from tests.tui.scenes import (
    app_with_a_held_run,
    app_with_forecasts,
    draining,
    on_the_run_page,
    sampled_app,
    sparklines_drawn,
    usage_app,
)

OUT = Path(__file__).resolve().parents[2] / "screenshots"
# (picture, recorded state, width, height, keys pressed first)
SHOTS = [(state, state, 120, 36, ()) for state in STATES] + [
    ("preemption", "preemption", 80, 24, ()),
    ("timeline", "head", 80, 24, ("v",)),  # narrow, the bottom panels take turns
    ("groups", "groups", 120, 36, ("g",)),  # sweeps, replica groups and schedules
    ("slurm", "slurm", 120, 36, ()),  # a front for a Slurm cluster
    ("draining", "draining", 120, 36, ()),  # the machine and GPU 3 drained by an admin
    ("usage", "usage", 120, 36, ("u",)),  # a week of usage per workspace, as bars
    ("held", "held", 120, 36, ()),  # a held run out of the order (the head state, one held)
    ("sparklines", "sampled", 120, 36, ()),  # the GPU panel's sparklines from telemetry
    ("run-page", "run-page", 120, 36, ()),  # a run's page: its use over its life, plotted
    ("shared", "shared", 120, 36, ()),  # runs sharing GPUs by memory, a shared head
    ("new-run", "new-run", 120, 36, ()),  # the New run form: JSON in step, More options
    ("forecasts", "forecasts", 120, 36, ()),  # likely starts from the lengths of finished runs
    ("forecasts", "forecasts", 80, 24, ("v",)),  # and their bands on the timeline
]


def app_of(state: str) -> AstraeusApp:
    if state in ("sampled", "run-page"):
        return sampled_app()
    if state == "usage":
        return usage_app()
    if state == "held":
        return app_with_a_held_run()
    if state == "forecasts":
        return app_with_forecasts()
    if state == "new-run":
        return app_for("head")
    if state == "draining":
        fake = draining()
        return AstraeusApp(fake, clock=fake.clock)
    return app_for(state)


async def shoot(name: str, state: str, width: int, height: int, keys: tuple[str, ...]) -> Path:
    if state == "new-run":  # opened in a project folder, as the snapshot test does
        PROJECT.mkdir(exist_ok=True)
        os.chdir(PROJECT)
    app = app_of(state)
    async with app.run_test(size=(width, height)) as pilot:
        await (new_run_filled if state == "new-run" else settled)(pilot)
        await pilot.press(*keys)
        await pilot.pause()
        if state == "usage":
            await until(pilot, lambda: app.screen.query_one(UsagePanel).usage is not None)
        if state == "sampled":
            await sparklines_drawn(pilot)
        if state == "run-page":
            await on_the_run_page(pilot)
        svg = app.export_screenshot(title=f"Astraeus — {state}")
    path = OUT / f"{name}-{width}x{height}.svg"
    path.write_text(svg, encoding="utf-8")
    return path


def to_png(svg: Path) -> None:
    # librsvg drops leading spaces of each text run unless told to keep them
    text = svg.read_text(encoding="utf-8").replace("<svg ", '<svg xml:space="preserve" ', 1)
    subprocess.run(["rsvg-convert", "--zoom", "1", "-o", str(svg.with_suffix(".png"))],
                   input=text.encode(), check=True)  # fmt: skip


def main() -> int:
    OUT.mkdir(exist_ok=True)
    converter = shutil.which("rsvg-convert")
    for shot in SHOTS:
        svg = asyncio.run(shoot(*shot))
        if converter:
            to_png(svg)
        print(f"{svg.relative_to(OUT.parent)}{' + .png' if converter else ''}")
    if not converter:
        print("no rsvg-convert: SVG only (apt-get install librsvg2-bin)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
