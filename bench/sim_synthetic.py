"""What a replay costs at 100,000 runs: a synthetic trace through `astra sim`'s engine.

Run by hand: ``.venv/bin/python bench/sim_synthetic.py [--runs 100000] [--load 0.71]
[--seed 1] [--limits exact] [--write FILE]``. Makes a trace of its own (nothing is read
from outside): arrivals as a Poisson process, lengths lognormal (median 20 min, a long
tail to days), 0, 1, 2, 4 or 8 GPUs, priorities 100 / 0 / −100, four workspaces; the
arrival rate set so the GPU-seconds asked are ``--load`` of 8 GPUs. Replays it under
`astraeus` (no estimates) and prints the CPU each tenth of the runs took, the waiting
queue's length then, and the total. ``--write`` also keeps the trace as an `astraeus`
CSV for ``astra sim``.
"""

from __future__ import annotations

import argparse
import csv
import math
import random
import sys
import time
from pathlib import Path

from runner.config.load import parse_config
from runner.sim.replay import Replay, SimMachine, sim_config
from runner.sim.trace import ASTRAEUS_COLUMNS, TraceRun

WORKSPACES = ("nlp", "robotics", "speech", "vision")
CONFIG = '[admins]\nusers = ["root"]\n' + "".join(
    f'[workspaces.{name}]\nmembers = ["*"]\n' for name in WORKSPACES
)
GIB = 1024**3
GPUS = 8
SIZES = ((0, 0.10), (1, 0.55), (2, 0.15), (4, 0.12), (8, 0.08))
PRIORITIES = ((100, 0.2), (0, 0.5), (-100, 0.3))


def _pick(rng: random.Random, table: tuple[tuple[int, float], ...]) -> int:
    x, total = rng.random(), 0.0
    for value, weight in table:
        total += weight
        if x < total:
            return value
    return table[-1][0]


def synthetic(runs: int, load: float, seed: int, limits: str) -> list[TraceRun]:
    rng = random.Random(seed)
    drawn = []
    for _ in range(runs):
        gpus = _pick(rng, SIZES)
        duration = min(30 * 86400.0, max(10.0, round(rng.lognormvariate(math.log(1200), 1.6))))
        drawn.append((gpus, duration, _pick(rng, PRIORITIES), rng.choice(WORKSPACES)))
    asked = sum(max(g, 0.25) * d for g, d, _, _ in drawn)  # a CPU-only run counted as 1/4
    rate = runs / (asked / (load * GPUS))  # arrivals a second
    out, t = [], 0.0
    for i, (gpus, duration, priority, workspace) in enumerate(drawn):
        t += rng.expovariate(rate)
        limit = {"exact": duration, "x2": 2 * duration, "none": None}[limits]
        out.append(
            TraceRun(
                f"syn-{i}", round(t, 3), duration, gpus=gpus, cpus=4.0 * max(gpus, 1),
                memory=16 * GIB * max(gpus, 1), priority=priority, workspace=workspace,
                time_limit=limit,
            )
        )  # fmt: skip
    return out


def write(trace: list[TraceRun], path: Path) -> None:
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(ASTRAEUS_COLUMNS)
        for r in trace:
            row = {
                "name": r.name, "submit": r.submit, "duration": r.duration, "gpus": r.gpus,
                "gpu_memory": "", "cpus": r.cpus, "memory": r.memory, "priority": r.priority,
                "workspace": r.workspace, "workers": r.workers,
                "time_limit": "" if r.time_limit is None else r.time_limit,
            }  # fmt: skip
            out.writerow([row[c] for c in ASTRAEUS_COLUMNS])


class Progress:
    """The CPU of each tenth of the runs, printed as the replay reaches it."""

    def __init__(self, total: int) -> None:
        self.step = max(1, total // 10)
        self.last = time.process_time()

    def __call__(self, submitted: int, waiting: int) -> None:
        if submitted % self.step:
            return
        now, spent = time.process_time(), time.process_time() - self.last
        print(
            f"{submitted:>7} submitted: {spent:6.1f} s CPU for the last {self.step}"
            f" ({1000 * spent / self.step:.1f} ms a run), {waiting} waiting",
            flush=True,
        )
        self.last = now


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--load", type=float, default=0.71)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--limits", choices=["exact", "x2", "none"], default="exact")
    parser.add_argument("--write", type=Path)
    args = parser.parse_args()
    trace = synthetic(args.runs, args.load, args.seed, args.limits)
    if args.write:
        write(trace, args.write)
    config = sim_config(parse_config(CONFIG))
    machine = SimMachine(GPUS, 80 * GIB, 16 * GPUS, 128 * GPUS * GIB)
    replay = Replay(trace, config, machine, resume=True, progress=Progress(len(trace)))
    began = time.process_time()
    done = replay.run()
    cpu = time.process_time() - began
    finished = sum(1 for o in done.outcomes if o.end is not None)
    print(
        f"{len(trace)} runs ({finished} finished) in {cpu:.1f} s CPU"
        f" ({1000 * cpu / len(trace):.1f} ms a run), {done.plans} plans"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
