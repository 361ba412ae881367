"""The idle rule's share of a telemetry sample: how busy each run's GPUs are, and the
tracker's stretches (runner/telemetry/idle.py), for a large machine's worth of runs.

Run by hand: ``.venv/bin/python bench/bench_idle.py [RUNS] [GPUS]`` (default 256 runs on
64 GPUs, half with NVML's per-process shares). Pure Python over readings made up here: no
processes, no NVML. Target: under 5 ms a sample (0.1 % of the 5 s interval). Measured
2026-12-01 (2 shared cores, load 6): 256 runs on 64 GPUs (4 a GPU, half idle), median
0.4–0.7 ms, max 4–9 ms (one outlier of 49 ms: the machine's other load).
"""

from __future__ import annotations

import statistics
import sys
import time

from runner.telemetry.gpus import GpuProcess, GpuReading
from runner.telemetry.idle import IdleTracker, gpu_use
from runner.telemetry.procs import TreeUsage
from runner.telemetry.workers import LiveWorker


def main(runs: int, gpus: int) -> None:
    workers = [LiveWorker(f"run-{i}", f"uid-{i}", "ws", (i % gpus,), 1000 + i)
               for i in range(runs)]  # fmt: skip
    trees = {f"{i}": TreeUsage(1.0, 1 << 20, frozenset({1000 + i, 5000 + i})) for i in range(runs)}
    readings = [GpuReading(g, f"GPU-{g}", "x", g % 3, 0, 80 << 30, 40, 60.0, False)
                for g in range(gpus)]  # fmt: skip
    processes = [GpuProcess(1000 + i, i % gpus, 1 << 30, i % 2) for i in range(runs)
                 if (i % gpus) % 2 == 0]  # fmt: skip
    tracker = IdleTracker(5.0)
    times = []
    for n in range(200):
        t = time.perf_counter()
        tracker.observe(gpu_use(workers, readings, processes, trees), float(n))
        times.append(time.perf_counter() - t)
    print(f"idle rule, {runs} runs on {gpus} GPUs: median {statistics.median(times) * 1e3:.2f} ms,"
          f" max {max(times) * 1e3:.2f} ms; {len(tracker.stretches())} runs idle")  # fmt: skip


if __name__ == "__main__":
    main(
        int(sys.argv[1]) if len(sys.argv) > 1 else 256,
        int(sys.argv[2]) if len(sys.argv) > 2 else 64,
    )
