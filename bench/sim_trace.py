"""How well each policy schedules a real GPU cluster's workload: `astra sim --compare` on
the Alibaba GPU cluster trace 2023, at 8 x 80 GiB GPUs.

Run by hand: ``.venv/bin/python bench/sim_trace.py [--trace FILE] [--sample 0.3 0.5]
[--limits exact x2 none] [--resume full none]``. The trace is read where it lies (by
default ``../shared/traces/openb_pod_list_default.csv`` beside the checkout), never
copied; its dense last 35 days (``--since 9900000``), runs longer than 7 days left out,
sampled with seed 1, over four workspaces of equal weight (a task's workspace is a
stable hash of its name). Prints one table per sample and limits, the four policies
side by side, and the CPU each replay took.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from runner.config.load import parse_config
from runner.sim.replay import POLICY_NAMES, Replay, SimMachine, sim_config
from runner.sim.report import render_table, summarise
from runner.sim.trace import ReadOptions, read_trace

TRACE = Path(__file__).resolve().parents[2] / "shared" / "traces" / "openb_pod_list_default.csv"
CONFIG = """
[admins]
users = ["root"]
""" + "".join(
    f'[workspaces.{name}]\nmembers = ["*"]\n' for name in ("nlp", "robotics", "speech", "vision")
)
GIB = 1024**3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--sample", type=float, nargs="+", default=[0.3, 0.5])
    parser.add_argument("--limits", nargs="+", default=["exact", "x2", "none"])
    parser.add_argument("--resume", nargs="+", default=["full"], choices=["full", "none"])
    parser.add_argument("--policies", nargs="+", default=list(POLICY_NAMES))
    parser.add_argument("--estimates-every", type=float, default=3600.0)
    args = parser.parse_args()
    if not args.trace.is_file():
        print(f"{args.trace}: no such trace (download it from its publisher)", file=sys.stderr)
        return 1
    config = sim_config(parse_config(CONFIG))
    machine = SimMachine(8, 80 * GIB, 128, 1024 * GIB)
    for sample in args.sample:
        for limits in args.limits:
            options = ReadOptions(
                since=9_900_000, longest=7 * 86400, sample=sample, seed=1, limits=limits,
                workspaces=tuple(sorted(config.workspaces)), gpu_memory=machine.gpu_memory,
            )  # fmt: skip
            trace = read_trace(args.trace, "alibaba", options)
            for resume in args.resume:
                summaries, cpu = [], []
                for policy in args.policies:
                    began = time.process_time()
                    done = Replay(
                        trace.runs, config, machine, policy=policy, resume=resume == "full",
                        estimate_every=args.estimates_every if policy == "astraeus" else None,
                    ).run()  # fmt: skip
                    cpu.append(f"{policy} {time.process_time() - began:.1f} s")
                    summaries.append(summarise(policy, done.outcomes, machine.gpus,
                                               done.ended_at, done.calibration))  # fmt: skip
                print(
                    f"## --sample {sample} --limits {limits} --resume {resume}:"
                    f" {len(trace.runs)} runs; CPU: {', '.join(cpu)}\n"
                )
                print(render_table(summaries))
                print(flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
