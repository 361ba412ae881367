"""One telemetry sample: how long the sampler's thread works for each interval.

Run by hand: ``.venv/bin/python bench/bench_telemetry.py [N]`` (default 50). Starts N
real process trees (a shell and a sleeping child each), then times the sampler's
``sample_once`` over 8 simulated GPUs with the N trees as live runs (psutil over each
tree, the simulation, the rings), and the rendering of ``GET /v1/telemetry``'s body
with history. Target: a sample of 50 runs < 100 ms (2 % of the 5 s interval). Measured
2026-12-01 (2 shared cores, load 7–8): median 14 ms, max 29 ms; the hour's history
body 3.8 MB in about 55–100 ms.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

import msgspec
import psutil

from runner import schema
from runner.telemetry.sampler import Sampler
from runner.telemetry.workers import LiveWorker


def main(count: int) -> None:
    trees = [subprocess.Popen(["sh", "-c", "sleep 300 & wait"]) for _ in range(count)]
    try:
        time.sleep(0.5)
        live = [LiveWorker(f"run-{i}", f"uid-{i}", "ws", (i % 8,), p.pid)
                for i, p in enumerate(trees)]  # fmt: skip
        sampler = Sampler(5.0, tuple(range(8)), True, lambda: live)
        times = []
        for _ in range(30):
            t = time.perf_counter()
            sample = sampler.sample_once()
            times.append(time.perf_counter() - t)
        assert len(sample.runs) == count and all(r.memory_bytes for r in sample.runs)
        for _ in range(690):  # a full hour's rings
            sampler.sample_once()
        t = time.perf_counter()
        body = schema.Telemetry(
            runs=[schema.TelemetryRun(name=r.run, workspace=r.workspace, history=[
                schema.TelemetryRunSample(time=s, cpu_percent=h.cpu_percent)
                for s, h in sampler.run_history(r.run_uid)]) for r in sample.runs])  # fmt: skip
        encoded = msgspec.json.encode(body)
        render = time.perf_counter() - t
        print(f"sample of {count} runs on 8 GPUs: median {statistics.median(times) * 1e3:.1f} ms, "
              f"max {max(times) * 1e3:.1f} ms")  # fmt: skip
        print(f"history body (an hour, {count} runs): {len(encoded) / 1e6:.1f} MB "
              f"in {render * 1e3:.0f} ms")  # fmt: skip
    finally:
        for p in trees:
            for child in psutil.Process(p.pid).children(recursive=True):
                child.kill()
            p.kill()
            p.wait()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 50)
