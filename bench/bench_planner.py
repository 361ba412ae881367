"""One planning cycle on a synthetic snapshot, at 1k, 10k and 100k waiting runs.

Run by hand: ``.venv/bin/python bench/bench_planner.py [N ...] [--unordered] [--shared]
[--as-shares]``.
Prints the median of several cycles per size and the growth against n log n.
The waiting runs come in the order the engine gives them (the store's, by
submission time and name); ``--unordered`` gives them in no order, the worst
case for the planner's sort. ``--shared``: a quarter of the waiting runs, and two of
the eight GPUs' running work, share GPUs by memory (placed GPU by GPU). ``--as-shares``:
each size also planned with every whole GPU asked and held as a full share (the pool twin,
runner/planner/pool.py ``as_full_shares``): what one rule for both modes would cost.
Targets on a 2-core machine: <= 20 ms at 10k, <= 250 ms at 100k.
"""

from __future__ import annotations

import math
import os
import random
import statistics
import sys
import time

from runner.model import GIB, Quota, Resources, Workspace
from runner.planner.plan import Machine, RunningUnit, Snapshot, WaitingRun, plan
from runner.planner.pool import as_full_shares

NOW = 1_790_856_000.0


def synthetic(
    n_waiting: int, seed: int = 7, *, unordered: bool = False, shared: bool = False
) -> Snapshot:
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
    if shared:  # GPUs 6 and 7 are shared: two runs of 30 GiB on each
        running = running[:6] + running[8:]
        for i, g in enumerate((6, 6, 7, 7)):
            running.append(
                RunningUnit(
                    f"share-{i}",
                    f"share-{i}",
                    f"ws{i}",
                    0,
                    Resources(0, 1000, 4 * GIB, 1, 30 * GIB),
                    (g,),
                    NOW - 600,
                    3600.0,
                    gpu_share=30 * GIB,
                )
            )
    rows = [
        (
            f"wait-{i}",
            f"ws{rnd.randrange(50)}",
            rnd.randint(-5, 5),
            NOW - rnd.randint(0, 1_000_000),
            (rnd.choice([1, 2, 4, 8]), rnd.choice([1000, 4000, 8000])),
            rnd.choice([None, 600.0, 3600.0, 86_400.0]),
        )
        for i in range(n_waiting)
    ]
    if not unordered:  # as the engine builds it: from the store's rows, by time and name
        rows.sort(key=lambda row: (row[3], row[0]))
    waiting = [
        WaitingRun(name, ws, priority, at, Resources(gpus, cpu, 16 * GIB, 1), (0,), limit)
        for name, ws, priority, at, (gpus, cpu), limit in rows
    ]
    if shared:  # every fourth run asks for 10-40 GiB of one GPU instead
        for i in range(0, len(waiting), 4):
            w, share = waiting[i], rnd.choice([10, 20, 40]) * GIB
            waiting[i] = WaitingRun(w.name, w.workspace, w.priority, w.submitted_at,
                                    Resources(0, 1000, 16 * GIB, 1, share), (0,), w.time_limit,
                                    gpu_share=share, gpu_count=1)  # fmt: skip
    return Snapshot(machine, workspaces, tuple(running), tuple(waiting))


def median_ms(snapshot: Snapshot, repeat: int) -> tuple[float, float]:
    """The median wall and CPU milliseconds of a cycle: on a busy machine the CPU time
    is the steadier of the two (the wall clock also counts waiting for a core)."""
    wall, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        plan(snapshot, NOW)
        wall.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    return statistics.median(wall), statistics.median(cpu)


def main() -> None:
    unordered, shared = "--unordered" in sys.argv[1:], "--shared" in sys.argv[1:]
    as_shares = "--as-shares" in sys.argv[1:]
    sizes = [int(a) for a in sys.argv[1:] if not a.startswith("--")] or [1_000, 10_000, 100_000]
    given = ("unordered" if unordered else "in submission order") + (
        ", a quarter shared by memory" if shared else ""
    )
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; waiting runs {given}")
    results = []
    for n in sizes:
        snapshot = synthetic(n, unordered=unordered, shared=shared)
        repeat = 21 if n <= 10_000 else 7
        ms, cpu = median_ms(snapshot, repeat)
        results.append((n, ms))
        print(f"{n:>7} waiting runs: median {ms:8.2f} ms per planning cycle ({cpu:.2f} ms CPU)")
        if as_shares:  # the same queue with every whole GPU a full share: all in the pool
            pooled, pooled_cpu = median_ms(as_full_shares(snapshot), repeat)
            print(f"{'':>7} as full shares: median {pooled:8.2f} ms ({pooled_cpu:.2f} ms CPU), "
                  f"{pooled_cpu / cpu:.2f} x the CPU of whole GPUs")  # fmt: skip
    base_n, base_ms = results[0]
    for n, ms in results[1:]:
        expected = base_ms * (n * math.log(n)) / (base_n * math.log(base_n))
        print(f"{n:>7}: {ms / expected:.2f} x the n log n growth from {base_n}")


if __name__ == "__main__":
    main()
