"""`astra sim --history` against a real daemon: a few short runs really run (the process
executor, `sleep`, simulated GPUs), their history entries carry what a replay needs, and
the replay read through the API finds each of them, as it asked; with `--config` it
replays them under the daemon's config and under the file's, side by side."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.harness import wait_for
from tests.support.served import Served

GIB = 1024**3
CONFIG = """
[workspaces.lab]
members = ["root"]
max_priority = 100
"""
# name, extra options of astra run
RUNS = [
    ("plain", ["--gpus", "1"]),
    ("urgent", ["--gpus", "2", "--priority", "50"]),
    ("shared", ["--gpus", "1", "--gpu-mem", "20GiB"]),
]


@pytest.fixture
def daemon(served: Callable[..., Served]) -> Served:
    """A daemon whose history holds the three runs of RUNS, all succeeded, and a run
    deleted while held (cancelled before it started)."""
    d = served(CONFIG, gpus=4, grace=2)
    for name, options in RUNS:
        done = d.astra(
            "run", "--name", name, *options, "--time-limit", "30", "--workspace", "lab",
            "--", "sleep", "1",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    held = d.astra("run", "--name", "never", "--hold", "--workspace", "lab", "--", "true")
    assert held.returncode == 0, held.stderr
    assert d.astra("delete", "never").returncode == 0

    expected = {**{name: "Succeeded" for name, _ in RUNS}, "never": "Cancelled"}

    def finished() -> bool:
        outcomes = {r["name"]: r["outcome"] for r in d.json("history", "--since", "1h")["runs"]}
        return outcomes == expected

    wait_for(finished, 60, "every run to finish")
    return d


def test_history_entries_carry_what_a_replay_needs(daemon: Served) -> None:
    entries = {r["name"]: r for r in daemon.json("history", "--since", "1h")["runs"]}
    plain, urgent, shared, never = (entries[n] for n in ("plain", "urgent", "shared", "never"))
    for entry in (plain, urgent, shared):
        assert entry["time_limit_seconds"] == 30 and entry["workers"] == 1
        assert 0.9 <= entry["run_seconds"] <= 15
        assert entry["run_seconds"] <= entry["elapsed_seconds"] + 0.01
    assert (plain["priority"], plain["gpus"], plain["gpu_memory_bytes"]) == (0, 1, None)
    assert (urgent["priority"], urgent["gpus"]) == (50, 2)
    assert (shared["gpus"], shared["gpu_memory_bytes"]) == (1, 20 * GIB)
    assert isinstance(plain["cpus"], float) and plain["memory_bytes"] is None
    assert (never["started_at"], never["run_seconds"]) == (None, 0.0)


def test_the_replay_of_the_history_finds_each_run(daemon: Served, tmp_path: Path) -> None:
    runs = tmp_path / "runs.ndjson"
    answer = daemon.json("sim", "--history", "1h", "--runs", str(runs))
    assert answer["trace"] == {"runs": 3, "left_out": {"never started": 1}}
    assert answer["history"]["complete"] is True
    assert answer["machine"]["gpus"] == 4 and answer["refused"] == {}
    (summary,) = answer["policies"]
    assert (summary["policy"], summary["runs"], summary["unfinished"]) == ("astraeus", 3, 0)
    rows = {row["name"]: row for row in map(json.loads, runs.read_text().splitlines())}
    assert {name: row["gpus"] for name, row in rows.items()} == {
        "plain": 1.0, "urgent": 2.0, "shared": 0.25,
    }  # fmt: skip
    assert rows["urgent"]["priority"] == 50 and rows["plain"]["workspace"] == "lab"
    assert all(
        row["state"] == "Succeeded" and 0.9 <= row["duration"] <= 15 for row in rows.values()
    )


def test_what_if_replays_under_the_daemons_config_and_the_files(
    daemon: Served, tmp_path: Path
) -> None:
    changed = tmp_path / "new.toml"
    changed.write_text(
        (daemon.home / "config.toml")
        .read_text()
        .replace("max_priority = 100", "max_priority = 100\nquota = { gpus = 1 }")
    )
    done = daemon.astra("sim", "--history", "1h", "--config", str(changed))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("3 runs finished since ")
    (header,) = [line for line in lines if line.startswith("policy ") and "now" in line]
    assert header.split() == ["policy", "now", "new.toml"]
    (runs,) = [line for line in lines if line.startswith("runs ")]
    assert runs.split() == ["runs", "3", "3"]

    answer = daemon.json("sim", "--history", "1h", "--config", str(changed))
    assert [s["policy"] for s in answer["policies"]] == ["now", "new.toml"]
    assert answer["policy"] == "astraeus"
    # under the file, the urgent run (2 GPUs) is over lab's quota of 1 GPU: it never starts
    now, new = answer["policies"]
    assert (now["unfinished"], new["unfinished"]) == (0, 1)


def test_one_line_errors(daemon: Served, tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("name,submit,duration\na,0,1\n")
    cases = [
        ((), "name a trace file, or --history"),
        ((str(trace), "--history", "1h"), "a trace file or --history, not both"),
        (("--history", "1h", "--config", str(trace), "--compare"), "--compare:"),
        (("--history", "yesterday"), "since:"),
    ]
    for args, message in cases:
        done = daemon.astra("sim", *args)
        assert done.returncode != 0
        assert len(done.stderr.strip().splitlines()) == 1 and message in done.stderr, args
