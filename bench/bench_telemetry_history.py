"""The telemetry history's writes: how long one transaction of samples holds the store.

Run by hand: ``.venv/bin/python bench/bench_telemetry_history.py [RUNS]`` (default 50).
A real SQLite store in a temporary folder; 8 GPUs and RUNS runs a sample. Times one
round written alone (a transaction per sample), a batch of 6 rounds (30 s at the 5 s
default: what the sampler writes), the upkeep (downsampling and pruning) over a full
day of history, and a week's read of every GPU. The loop waits for the store's writer
lock at most as long as one of these transactions. Measured 2026-12-01 (2 shared cores,
load 3): one round 2.2 ms median (7 ms max), a batch of 6 rounds 3.6 ms (16 ms max); the
upkeep every 5 minutes over a day of history (1.25 M rows) 50 ms, a week's read 6 ms.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from runner.store import telemetry as th
from runner.store.db import Store
from runner.store.telemetry import GpuSample, RunSample

GPUS = 8


def _round(at: float, runs: int) -> tuple[list[GpuSample], list[RunSample]]:
    gpus = [GpuSample(at, g, 93.0, 60 << 30, 71.0, 330.0) for g in range(GPUS)]
    work = [RunSample(at, f"uid-{i:04d}", "vision", (i % GPUS,), 101.2, 1 << 30, 60 << 30, 93.0)
            for i in range(runs)]  # fmt: skip
    return gpus, work


def _ms(times: list[float]) -> str:
    return f"median {statistics.median(times) * 1e3:.1f} ms, max {max(times) * 1e3:.1f} ms"


def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = Store(Path(folder) / "state.db")
        now = time.time()
        one, six = [], []
        for i in range(30):
            gpus, work = _round(now + 5 * i, runs)
            t = time.perf_counter()
            th.write_samples(store, gpus, work)
            one.append(time.perf_counter() - t)
        for i in range(30):
            rounds = [_round(now + 150 + 30 * i + 5 * k, runs) for k in range(6)]
            t = time.perf_counter()
            th.write_samples(store, [g for r in rounds for g in r[0]],
                             [w for r in rounds for w in r[1]])  # fmt: skip
            six.append(time.perf_counter() - t)
        print(f"one round ({GPUS} GPUs, {runs} runs): {_ms(one)}")
        print(f"a batch of 6 rounds: {_ms(six)}")
        # a day of history at 5 s, then its upkeep and a read
        start = now - 86_400
        for hour in range(24):
            rows = [_round(start + hour * 3600 + 5 * k, runs) for k in range(720)]
            th.write_samples(store, [g for r in rows for g in r[0]],
                             [w for r in rows for w in r[1]])  # fmt: skip
        t = time.perf_counter()
        th.maintain(store, now + 1200, now + 1100)
        upkeep = time.perf_counter() - t
        t = time.perf_counter()
        th.maintain(store, now + 1500, now + 1400)
        again = time.perf_counter() - t
        t = time.perf_counter()
        series = th.gpu_series(store, now - 7 * 86_400, now)
        read = time.perf_counter() - t
        size = (Path(folder) / "state.db").stat().st_size
        print(f"a day's upkeep: first {upkeep * 1e3:.0f} ms, next {again * 1e3:.0f} ms; "
              f"a week's read of {GPUS} GPUs ({sum(map(len, series.values()))} points): "
              f"{read * 1e3:.0f} ms; file {size / 1e6:.0f} MB")  # fmt: skip


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 50)
