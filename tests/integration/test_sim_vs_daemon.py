"""`astra sim` against a real daemon: one small trace, replayed on the virtual clock and
run for real (the process executor, `sleep` commands, simulated GPUs), starts the same
runs in the same order and preempts the same victims."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from runner.model import StopReason
from runner.store.db import Store
from tests.support.harness import wait_for
from tests.support.served import Served

# name, submit, duration, gpus, priority, time limit: c (priority 100) preempts a and b,
# which start again from scratch when it ends; d waits for a's end
TRACE = [
    ("a", 0, 4, 2, 0, 10),
    ("b", 0, 8, 2, 0, 15),
    ("c", 2, 3, 4, 100, 8),
    ("d", 3, 2, 1, 0, 6),
]
CONFIG = """
[workspaces.lab]
members = ["root"]
max_priority = 100
"""
WAVE = 0.6  # seconds: starts closer than this came from one plan


def waves(starts: list[tuple[float, str]]) -> list[list[str]]:
    """The runs started together (in one plan), wave by wave."""
    out: list[list[str]] = []
    last = None
    for at, name in sorted(starts):
        if last is None or at - last > WAVE:
            out.append([])
        out[-1].append(name)
        last = at
    return [sorted(w) for w in out]


def test_the_replay_starts_and_preempts_what_the_daemon_does(
    served: Callable[..., Served], tmp_path: Path
) -> None:
    d = served(CONFIG, gpus=4, grace=2)
    begin = time.monotonic()
    for name, submit, duration, gpus, priority, limit in TRACE:
        time.sleep(max(0.0, begin + submit - time.monotonic()))
        done = d.astra(
            "run", "--name", name, "--gpus", str(gpus), "--priority", str(priority),
            "--time-limit", str(limit), "--workspace", "lab", "--", "sleep", str(duration),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr

    def finished() -> bool:
        states = {r["name"]: r["outcome"] for r in d.json("history")["runs"]}
        return states == dict.fromkeys(states, "Succeeded") and len(states) == len(TRACE)

    wait_for(finished, 60, "every run to succeed")
    store = Store(d.home / "state.db")
    try:
        real = [(w.started_at, w.run) for r, *_ in TRACE for w in store.workers.of(r)]
        real_preempted = {
            r: sum(w.stop_reason == StopReason.PREEMPT for w in store.workers.of(r))
            for r, *_ in TRACE
        }
    finally:
        store.close()

    trace = tmp_path / "trace.csv"
    trace.write_text(
        "name,submit,duration,gpus,priority,time_limit,workspace\n"
        + "".join(",".join(map(str, row)) + ",lab\n" for row in TRACE)
    )
    runs = tmp_path / "runs.ndjson"
    done = d.astra(
        "sim", str(trace), "--config", str(d.home / "config.toml"), "--resume", "none",
        "--runs", str(runs),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in runs.read_text().splitlines()]
    replayed = [(at, row["name"]) for row in rows for at in row["starts"]]

    assert waves(replayed) == [["a", "b"], ["c"], ["a", "b"], ["d"]]
    assert waves(replayed) == waves(real)
    assert {row["name"]: row["preemptions"] for row in rows} == real_preempted
    assert real_preempted == {"a": 1, "b": 1, "c": 0, "d": 0}
    assert all(row["state"] == "Succeeded" for row in rows)
