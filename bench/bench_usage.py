"""Usage and history over many finished runs: how long a read takes.

Run by hand: ``.venv/bin/python bench/bench_usage.py [N]`` (default 50,000). Makes a
state database in a temporary folder holding N finished runs in 3 workspaces, each
with its usage record (three in four started once; each queued, then cancelled: the finish that
writes the record),
then times ``astra usage`` (by workspace and by user, over 400 days) and ``astra
history`` (the newest 1,000) as the API's service reads them. Targets: usage over
50,000 runs < 1 s; history < 100 ms.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from runner.model import RunState
from runner.reasons import Reason, ReasonCode
from runner.service.caller import Caller
from runner.service.usage import history, usage_report
from runner.store.db import RunRow, Store, new_run_uid

WORKSPACES = ("nlp", "speech", "vision")
BATCH = 2000


def fill(store: Store, total: int) -> float:
    """N runs submitted and finished; the seconds one finish took, median of batches."""
    now, per_finish = time.time(), []
    for start in range(0, total, BATCH):
        names = [f"r{i}" for i in range(start, min(total, start + BATCH))]
        with store.transaction() as tx:
            for i, name in enumerate(names):
                ws = WORKSPACES[i % 3]
                at = now - 86400 * (i % 300)
                run = RunRow(name, ws, f"user{i % 7}", 1000, 1000, "{}", 0, RunState.QUEUED,
                             None, at, None, None, None, 0, 0, 0, None, None, False,
                             run_uid=new_run_uid(at))  # fmt: skip
                store.runs.insert_in(tx, run, Reason("Submitted", code=ReasonCode.MESSAGE))
                if i % 4:  # three in four started once (a wait to count), then were queued
                    store.workers.insert(tx, name, 1, 0, (i % 8,), 1000, 0, at + i % 600)
        t0 = time.perf_counter()
        with store.transaction() as tx:
            for name in names:
                store.runs.cancel_queued(tx, name, now)
        per_finish.append((time.perf_counter() - t0) / len(names))
    return statistics.median(per_finish)


def timed(fn: object, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    admin = Caller(0, 0, "root", True, frozenset())
    member = Caller(1000, 1000, "user1", False, frozenset({"vision"}))
    with tempfile.TemporaryDirectory() as folder:
        store = Store(Path(folder) / "state.db")
        finish = fill(store, total)
        print(f"{total} finished runs; a finish with its usage record: {finish * 1e6:.0f} µs")
        for who, caller in (("admin", admin), ("member", member)):
            for by in ("workspace", "user"):
                seconds = timed(lambda c=caller, b=by: usage_report(store, c, "400d", b))
                print(f"usage --since 400d --by {by} ({who}): {seconds * 1000:.0f} ms")
            seconds = timed(lambda c=caller: history(store, c, "400d"))
            print(f"history --since 400d, newest 1000 ({who}): {seconds * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
