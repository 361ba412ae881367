"""One planning cycle on a synthetic snapshot, at 1k, 10k and 100k waiting runs.

Run by hand: ``.venv/bin/python bench/bench_planner.py``. Prints the median of
several cycles per size and the growth against n log n.
Targets on a 2-core machine: <= 20 ms at 10k, <= 250 ms at 100k.
"""

from __future__ import annotations

import math
import random
import statistics
import sys
import time

from runner.model import GIB, Quota, Resources, Workspace
from runner.planner.plan import Machine, RunningUnit, Snapshot, WaitingRun, plan

NOW = 1_790_856_000.0


def synthetic(n_waiting: int, seed: int = 7) -> Snapshot:
    rnd = random.Random(seed)
    machine = Machine(tuple(range(8)), 128_000, 1024 * GIB)
    workspaces = {
        f"ws{i}": Workspace(
            f"ws{i}",
            Quota(gpus=rnd.choice([2, 4, 8]), workers=rnd.choice([None, 20])) if i % 2 else None,
            weight=rnd.choice([0.5, 1.0, 2.0]),
        )
        for i in range(50)
    }
    running = []
    for i in range(100):
        gpus = (i,) if i < 8 else ()
        running.append(
            RunningUnit(
                f"run-{i}",
                f"run-{i}",
                f"ws{i % 50}",
                rnd.randint(-5, 5),
                Resources(len(gpus), 1000, 4 * GIB, 1),
                gpus,
                NOW - rnd.randint(0, 36_000),
                rnd.choice([None, 3600.0, 7200.0, 86_400.0]),
            )
        )
    waiting = [
        WaitingRun(
            f"wait-{i}",
            f"ws{rnd.randrange(50)}",
            rnd.randint(-5, 5),
            NOW - rnd.randint(0, 1_000_000),
            Resources(rnd.choice([1, 2, 4, 8]), rnd.choice([1000, 4000, 8000]), 16 * GIB, 1),
            (0,),
            rnd.choice([None, 600.0, 3600.0, 86_400.0]),
        )
        for i in range(n_waiting)
    ]
    return Snapshot(machine, workspaces, tuple(running), tuple(waiting))


def median_ms(snapshot: Snapshot, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        plan(snapshot, NOW)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [1_000, 10_000, 100_000]
    results = []
    for n in sizes:
        ms = median_ms(synthetic(n), repeat=21 if n <= 10_000 else 7)
        results.append((n, ms))
        print(f"{n:>7} waiting runs: median {ms:8.2f} ms per planning cycle")
    base_n, base_ms = results[0]
    for n, ms in results[1:]:
        expected = base_ms * (n * math.log(n)) / (base_n * math.log(base_n))
        print(f"{n:>7}: {ms / expected:.2f} x the n log n growth from {base_n}")


if __name__ == "__main__":
    main()
