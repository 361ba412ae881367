"""The dashboard with 10,000 queued runs: a refresh and a keypress, medians.

Run by hand: ``.venv/bin/python bench/bench_tui.py [N]`` (N queued runs, 10,000 by
default; 100000 for the large case). A fake daemon (the
recorded ``backfill`` state plus 10,000 synthetic queued runs) feeds the real
app in a headless terminal of 120x36.

- refresh: one ``change`` event with 100 upserts (new positions, priorities,
  reasons), from the stream to the table merged, re-sorted and repainted (and,
  for scale, one where every queued run's position moves);
- keypress: a cursor move (down, page down) and a filter (state, search).

Each figure is the CPU time the app spends (merge, layout, paint): the wall
time around it also holds the test pilot's idle detection (>= 20 ms of sleep),
which a person at a terminal does not wait for. Targets: refresh < 100 ms,
keypress < 50 ms.
"""

from __future__ import annotations

import asyncio
import copy
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from textual.pilot import Pilot

from astraeus_tui.app import AstraeusApp
from astraeus_tui.screens.main import MainScreen
from astraeus_tui.widgets.queue_table import QueueTable
from tests.tui.fake_client import FakeClient, load_fixture
from tests.tui.helpers import main_screen, until

N = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000  # queued runs (also: 100000)
UPSERTS = 100
REPEAT = 15
TARGETS = {"refresh": 100.0, "keypress": 50.0}


def fixture(n: int, seed: int = 5) -> dict[str, Any]:
    data = load_fixture("backfill")
    template = next(r for r in data["snapshot"] if r["name"] == "sweep-lr")
    rnd = random.Random(seed)
    runs = [r for r in data["snapshot"] if r["state"] != "Queued"]
    for i in range(n):
        run = copy.deepcopy(template)
        name = f"sweep-{i:05d}"
        run.update(id=name, name=name, position=i + 2, priority=rnd.choice([0, 0, 0, -5, 5]),
                   workspace=rnd.choice(["vision", "nlp", "default"]),
                   gpus_requested=rnd.choice([1, 2, 4]))  # fmt: skip
        runs.append(run)
    data["snapshot"] = runs
    return data


async def measure(pilot: Pilot[Any], act: Callable[[], Awaitable[None]]) -> tuple[float, float]:
    """(cpu ms, wall ms) of ``act`` and everything it sets off, up to idle."""
    await pilot.pause()
    cpu, wall = time.process_time(), time.perf_counter()
    await act()
    await pilot.pause()
    return (time.process_time() - cpu) * 1000, (time.perf_counter() - wall) * 1000


def change(fake: FakeClient, rnd: random.Random, round_: int) -> list[dict[str, Any]]:
    queued = [r for r in fake.data["snapshot"] if r["state"] == "Queued"]
    upserts = []
    for run in rnd.sample(queued, UPSERTS):
        new = dict(run, priority=rnd.randint(-10, 10), position=rnd.randint(1, N))
        new["reason"] = f"Queued behind pretrain-7b (round {round_})"
        upserts.append(new)
    return upserts


def merged(screen: MainScreen, run: dict[str, Any]) -> bool:
    """The model holds ``run`` as pushed (its reason and position)."""
    held = screen.model.runs.get(run["id"])
    return held is not None and (held.reason, held.position) == (run["reason"], run["position"])


async def refreshes(pilot: Pilot[Any], fake: FakeClient, screen: MainScreen) -> list[float]:
    rnd, cpu = random.Random(11), []
    for i in range(REPEAT):
        upserts = change(fake, rnd, i)
        last = upserts[-1]

        async def act(upserts: list[dict[str, Any]] = upserts, last: Any = last) -> None:
            fake.push(upserts)
            await until(pilot, lambda: merged(screen, last))

        cpu.append((await measure(pilot, act))[0])
    return cpu


async def shift_all(pilot: Pilot[Any], fake: FakeClient, screen: MainScreen) -> float:
    """A run submitted above every queued one: each position moves (no target, for scale)."""
    queued = [r for r in fake.data["snapshot"] if r["state"] == "Queued"]
    upserts = [dict(r, position=(r["position"] or 0) + 1) for r in queued]
    last = upserts[-1]

    async def act() -> None:
        fake.push(upserts)
        await until(pilot, lambda: merged(screen, last), 120)

    return (await measure(pilot, act))[0]


async def hold_near_the_head(
    pilot: Pilot[Any], fake: FakeClient, screen: MainScreen, release: bool
) -> float:
    """A run near the head held (or released): its object, and every run behind it by its
    place alone (the stream's ``moved``), as the daemon sends it."""
    queued = sorted((r for r in fake.data["snapshot"] if r["state"] == "Queued"),
                    key=lambda r: r["position"] or 0)  # fmt: skip
    step = 0 if release else -1
    third = dict(queued[2], position=queued[2]["position"] if release else None)
    moved = [(r["id"], (r["position"] or 0) + step) for r in queued[3:]]
    last_id, last_position = moved[-1]

    def done() -> bool:
        run = screen.model.runs.get(last_id)
        return run is not None and run.position == last_position

    async def act() -> None:
        fake.push([third], moved=moved)
        await until(pilot, done, 120)

    return (await measure(pilot, act))[0]


async def keypresses(pilot: Pilot[Any], screen: MainScreen) -> dict[str, list[float]]:
    table = screen.query_one(QueueTable)
    out: dict[str, list[float]] = {"down": [], "pagedown": [], "filter": [], "search": []}
    for _ in range(REPEAT):
        for key in ("down", "pagedown"):
            out[key].append((await measure(pilot, lambda k=key: pilot.press(k)))[0])  # type: ignore[misc]
    for _ in range(REPEAT // 3):
        for _ in range(5):  # the state filter's whole cycle: all, Queued, Starting, Running, …
            out["filter"].append((await measure(pilot, lambda: pilot.press("t")))[0])
    await pilot.press("slash")
    for ch in "sweep-0001":
        out["search"].append((await measure(pilot, lambda c=ch: pilot.press(c)))[0])  # type: ignore[misc]
    assert table.row_count == 10, table.row_count
    return out


async def main() -> int:
    fake = FakeClient(fixture(N))
    app = AstraeusApp(fake, clock=fake.clock)
    started = time.perf_counter()
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await main_screen(pilot)
        await until(pilot, lambda: screen.query_one(QueueTable).row_count >= N, 120)
        await pilot.pause()
        loaded = (time.perf_counter() - started) * 1000
        print(f"start to the whole queue on screen, a snapshot of {N} runs: {loaded:.0f} ms wall")
        results = {"refresh (100 upserts)": await refreshes(pilot, fake, screen)}
        shifted = await shift_all(pilot, fake, screen)
        results["refresh: hold/release"] = [
            await hold_near_the_head(pilot, fake, screen, release=i % 2 == 1) for i in range(6)
        ]
        for key, values in (await keypresses(pilot, screen)).items():
            results[f"keypress: {key}"] = values
    failed = False
    for label, values in results.items():
        target = TARGETS["refresh" if label.startswith("refresh") else "keypress"]
        median = statistics.median(values)
        ok = median < target
        failed |= not ok
        print(f"{label:<24} median {median:6.1f} ms  max {max(values):6.1f} ms  "
              f"target < {target:.0f} ms  {'ok' if ok else 'MISSED'}")  # fmt: skip
    print(f"refresh, all {N} positions moved (no target): {shifted:.0f} ms")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
