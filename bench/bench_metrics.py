"""GET /metrics over a large queue: how long one scrape takes.

Run by hand: ``.venv/bin/python bench/bench_metrics.py [N]`` (default 100,000). Makes a state
database in a temporary folder holding N queued runs in 3 workspaces (each with its
``Submitted`` event; 64 of them with a live worker holding a GPU), reads the queue once (as
the daemon's loop does, which keeps it), then renders the daemon's registry as ``GET
/metrics`` does: the first scrape counts every event the store keeps, later ones only the
events written since. Targets: first scrape < 1 s; a later one < 100 ms (a
scrape every 15 s costs the daemon under 1 % of a core).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import cast

from prometheus_client import generate_latest

from runner.api.metrics import Metrics
from runner.api.served import Daemon
from runner.clock import Clock
from runner.config.load import parse_config
from runner.engine.backend import Backend, LoopStatus
from runner.engine.settings import LoopSettings
from runner.gpus import simulated_inventory
from runner.model import RunState
from runner.planner.plan import Machine
from runner.reasons import Reason, ReasonCode
from runner.service.loopview import LoopView
from runner.service.runs import Service
from runner.store.db import RunRow, Store, new_run_uid

WORKSPACES = ("nlp", "speech", "vision")
BATCH = 5000
CONFIG = "".join(f'[workspaces.{ws}]\nmembers = ["*"]\n' for ws in WORKSPACES)


def fill(store: Store, total: int) -> None:
    now = time.time()
    for start in range(0, total, BATCH):
        with store.transaction() as tx:
            for i in range(start, min(total, start + BATCH)):
                name = f"r{i}"
                run = RunRow(name, WORKSPACES[i % 3], f"user{i % 7}", 1000, 1000, "{}", 0,
                             RunState.QUEUED, None, now, None, None, None, 0, 0, 0, None, None,
                             False, run_uid=new_run_uid(now))  # fmt: skip
                store.runs.insert_in(tx, run, Reason("Submitted", code=ReasonCode.MESSAGE))
                if i % (total // 64 or 1) == 0:
                    store.workers.insert(tx, name, 1, 0, (i % 8,), 1000, 0, now)


def main() -> int:
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    with tempfile.TemporaryDirectory() as folder:
        store = Store(Path(folder) / "state.db")
        fill(store, total)
        store.runs.all(active_only=True)  # the loop's read: kept while nothing moves
        backend = SimpleNamespace(status=LoopStatus(), clock=Clock(), capabilities=None)
        inventory = simulated_inventory(8, "bench")
        config = parse_config(CONFIG)
        machine = Machine(tuple(range(8)), 64_000, 512 << 30)
        settings = LoopSettings(machine, {}, {}, Path(folder) / "logs")
        daemon = SimpleNamespace(
            config=config,
            inventory=inventory,
            service=Service(store, config, settings=settings),
            loop=LoopView(cast(Backend, backend)),
            telemetry=SimpleNamespace(latest=lambda: None),
        )
        metrics = Metrics(cast(Daemon, daemon))
        t0 = time.perf_counter()
        text = metrics.render()
        first = time.perf_counter() - t0
        later = []
        for _ in range(5):
            t0 = time.perf_counter()
            generate_latest(metrics.registry)  # read again, not the text kept for a second
            later.append(time.perf_counter() - t0)
        print(f"{total} queued runs, {len(text)} bytes of metrics")
        print(f"first scrape (every event counted): {first * 1000:.0f} ms")
        print(f"later scrape (median of 5): {statistics.median(later) * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
